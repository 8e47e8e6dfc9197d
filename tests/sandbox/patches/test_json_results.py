"""Patch 6 (``emulator.patches.json_results``): the fast JSON path answers exactly what moto's own
model-driven serializer answers: a DynamoDB workload covering every attribute type, return values,
consumed capacity, pagination, batches, transactions and stream records, and an SQS workload covering
message and system attributes (binary ones included), FIFO sequence numbers, batch failures and empty
receives, run with both, response by response; and it is the serializer that the patch spares."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import boto3
import pytest
from moto import mock_aws

from emulator.patches import json_results
from tests.sandbox.patches.support import installed


@pytest.fixture
def verified() -> Iterator[list[tuple[str, str, Any, Any]]]:
    remove = json_results.install()
    json_results.VERIFY_FAST_JSON = []
    try:
        yield json_results.VERIFY_FAST_JSON
    finally:
        json_results.VERIFY_FAST_JSON = None
        remove()


ITEM: dict[str, Any] = {
    "pk": {"S": "OP#1"},
    "sk": {"S": "OPERATION"},
    "gsi": {"S": "payer#1"},
    "amount": {"N": "10.50"},
    "count": {"N": "3"},
    "blob": {"B": b"\x00\x01binary\xff"},
    "tags": {"SS": ["a", "b"]},
    "scores": {"NS": ["1", "2.5"]},
    "blobs": {"BS": [b"x", b"\x00y"]},
    "flag": {"BOOL": False},
    "nothing": {"NULL": True},
    "details": {"M": {"nested": {"L": [{"S": "x"}, {"N": "1"}, {"M": {"deep": {"B": b"z"}}}]}}},
    "steps": {"L": [{"M": {"status": {"S": "PENDING"}, "at": {"S": "2026-12-01T00:00:00.000Z"}}}]},
}


def test_the_fast_json_path_answers_what_motos_serializer_answers(
    verified: list[tuple[str, str, Any, Any]],
) -> None:
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        streams = boto3.client("dynamodbstreams", region_name="us-east-1")
        keys = [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]
        ddb.create_table(
            TableName="t",
            KeySchema=keys,
            AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in ("pk", "sk", "gsi")],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "by-gsi",
                    "KeySchema": [{"AttributeName": "gsi", "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        arn = ddb.describe_table(TableName="t")["Table"]["LatestStreamArn"]
        shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")[
            "ShardIterator"
        ]

        key = {"pk": ITEM["pk"], "sk": ITEM["sk"]}
        ddb.put_item(TableName="t", Item=ITEM, ReturnConsumedCapacity="TOTAL")
        ddb.put_item(TableName="t", Item=ITEM, ReturnValues="ALL_OLD", ReturnConsumedCapacity="INDEXES")
        for i in range(12):
            ddb.put_item(TableName="t", Item={**ITEM, "pk": {"S": f"OP#{i + 2}"}})
        ddb.get_item(TableName="t", Key=key)
        ddb.get_item(TableName="t", Key={"pk": {"S": "missing"}, "sk": {"S": "x"}})
        ddb.get_item(
            TableName="t",
            Key=key,
            ProjectionExpression="#s, details.nested[2], #b",
            ExpressionAttributeNames={"#s": "steps", "#b": "blob"},
            ReturnConsumedCapacity="TOTAL",
        )
        for values in ("ALL_NEW", "UPDATED_OLD", "UPDATED_NEW", "ALL_OLD", "NONE"):
            ddb.update_item(
                TableName="t",
                Key=key,
                UpdateExpression="SET #c = #c + :one, steps = list_append(steps, :step)",
                ExpressionAttributeNames={"#c": "count"},
                ExpressionAttributeValues={":one": {"N": "1"}, ":step": {"L": [{"M": {"s": {"S": "x"}}}]}},
                ReturnValues=values,
            )
        ddb.query(
            TableName="t",
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "OP#1"}},
            ReturnConsumedCapacity="TOTAL",
        )
        ddb.query(
            TableName="t",
            IndexName="by-gsi",
            KeyConditionExpression="gsi = :g",
            ExpressionAttributeValues={":g": {"S": "payer#1"}},
            Limit=5,
        )
        ddb.query(
            TableName="t",
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "OP#1"}},
            Select="COUNT",
        )
        for page in ddb.get_paginator("scan").paginate(
            TableName="t",
            ProjectionExpression="pk, sk, #s",
            ExpressionAttributeNames={"#s": "steps"},
            PaginationConfig={"PageSize": 5},
        ):
            assert "Items" in page
        ddb.scan(TableName="t", FilterExpression="amount > :a", ExpressionAttributeValues={":a": {"N": "5"}})
        ddb.batch_get_item(
            RequestItems={"t": {"Keys": [key, {"pk": {"S": "OP#3"}, "sk": {"S": "OPERATION"}}]}},
            ReturnConsumedCapacity="TOTAL",
        )
        ddb.batch_write_item(
            RequestItems={
                "t": [
                    {"PutRequest": {"Item": {**ITEM, "pk": {"S": "OP#batch"}}}},
                    {"DeleteRequest": {"Key": {"pk": {"S": "OP#3"}, "sk": {"S": "OPERATION"}}}},
                ]
            }
        )
        ddb.transact_get_items(TransactItems=[{"Get": {"TableName": "t", "Key": key}}])
        ddb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": "t", "Item": {**ITEM, "pk": {"S": "OP#tx"}}}},
                {"Update": {"TableName": "t", "Key": key, "UpdateExpression": "REMOVE nothing"}},
            ],
            ReturnConsumedCapacity="TOTAL",
        )
        ddb.delete_item(TableName="t", Key=key, ReturnValues="ALL_OLD")
        records: list[dict[str, Any]] = []
        while True:
            page = streams.get_records(ShardIterator=iterator, Limit=7)
            records += page["Records"]
            if not page["Records"]:
                break
            iterator = page["NextShardIterator"]
        _sqs_workload()

    # boto3 parsed the fast responses into what it parses for DynamoDB (a sanity check of the path).
    assert {r["eventName"] for r in records} == {"INSERT", "MODIFY", "REMOVE"}
    assert records[0]["dynamodb"]["NewImage"]["blob"]["B"] == b"\x00\x01binary\xff"
    assert isinstance(records[0]["dynamodb"]["ApproximateCreationDateTime"].year, int)
    assert Decimal(records[-1]["dynamodb"]["OldImage"]["amount"]["N"]) == Decimal("10.50")

    operations = {(service, op) for service, op, _, _ in verified}
    assert operations == json_results.FAST_JSON_OPERATIONS
    for service, op, fast, slow in verified:
        status, headers, body = slow
        assert fast == (status, headers, json.loads(body)), (service, op, fast, slow)


def _sqs_workload() -> None:
    sqs = boto3.client("sqs", region_name="us-east-1")
    standard = sqs.create_queue(QueueName="q")["QueueUrl"]
    fifo = sqs.create_queue(
        QueueName="q.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"}
    )["QueueUrl"]
    attributes: dict[str, Any] = {
        "eventType": {"DataType": "String", "StringValue": "PaymentRequested"},
        "attempt": {"DataType": "Number", "StringValue": "2"},
        "raw": {"DataType": "Binary", "BinaryValue": b"\x00\xffbytes"},
    }
    assert sqs.get_queue_url(QueueName="q")["QueueUrl"] == standard
    sqs.send_message(QueueUrl=standard, MessageBody='{"a": "\u00e9"}', MessageAttributes=attributes)
    sqs.send_message(QueueUrl=standard, MessageBody="plain")
    sqs.send_message(QueueUrl=fifo, MessageBody="first", MessageGroupId="g")
    sqs.send_message_batch(
        QueueUrl=standard,
        Entries=[
            {"Id": "ok", "MessageBody": "b1", "MessageAttributes": attributes},
            {"Id": "delayed", "MessageBody": "b2", "DelaySeconds": 0},
        ],
    )
    sqs.send_message_batch(QueueUrl=fifo, Entries=[{"Id": "f", "MessageBody": "f2", "MessageGroupId": "h"}])
    received = sqs.receive_message(
        QueueUrl=standard,
        MaxNumberOfMessages=10,
        MessageSystemAttributeNames=["All"],
        MessageAttributeNames=["All"],
    )["Messages"]
    assert {m["Body"] for m in received} == {'{"a": "\u00e9"}', "plain", "b1", "b2"}
    assert any(
        m.get("MessageAttributes", {}).get("raw", {}).get("BinaryValue") == b"\x00\xffbytes" for m in received
    )
    sqs.receive_message(QueueUrl=fifo, MaxNumberOfMessages=10, MessageSystemAttributeNames=["SequenceNumber"])
    sqs.receive_message(QueueUrl=standard, MaxNumberOfMessages=10)  # nothing visible: an empty answer
    handles = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(received)]
    sqs.change_message_visibility_batch(
        QueueUrl=standard,
        Entries=[
            {**handles[0], "VisibilityTimeout": 0},
            {"Id": "bad", "ReceiptHandle": "not-a-handle", "VisibilityTimeout": 0},
        ],
    )
    sqs.delete_message_batch(
        QueueUrl=standard, Entries=[*handles, {"Id": "bad", "ReceiptHandle": "not-a-handle"}]
    )
    sqs.get_queue_attributes(QueueUrl=standard, AttributeNames=["All"])
    sqs.get_queue_attributes(QueueUrl=fifo, AttributeNames=["ApproximateNumberOfMessages", "FifoQueue"])


def _serializations_of_a_get_item_and_a_describe_table(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times moto's serializer runs for a GetItem, and for a DescribeTable."""
    from moto.core.serialize import ResponseSerializer

    counts = [0]  # the setup's, then the GetItem's, then the DescribeTable's
    serialize = ResponseSerializer.serialize

    def counted(self: Any, result: Any) -> Any:
        counts[-1] += 1
        return serialize(self, result)

    with mock_aws(), monkeypatch.context() as counting:
        counting.setattr(ResponseSerializer, "serialize", counted)
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        ddb.put_item(TableName="t", Item={"pk": {"S": "k"}, "blob": {"B": b"\x00"}})
        counts.append(0)
        assert ddb.get_item(TableName="t", Key={"pk": {"S": "k"}})["Item"]["blob"] == {"B": b"\x00"}
        counts.append(0)
        assert ddb.describe_table(TableName="t")["Table"]["TableName"] == "t"
    return counts[1:]


def test_data_plane_results_skip_motos_serializer_and_the_control_plane_keeps_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _serializations_of_a_get_item_and_a_describe_table(monkeypatch) == [1, 1]
    with installed(json_results.install):
        assert _serializations_of_a_get_item_and_a_describe_table(monkeypatch) == [0, 1]
