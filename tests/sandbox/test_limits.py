"""The limits suite: each request AWS refuses and moto alone accepts is refused by the emulator, with
AWS's error code; the request at the limit still passes (``emulator.limits``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from emulator import limits

REGION = "us-east-1"


@dataclass
class World:
    sqs: Any
    sns: Any
    ddb: Any
    events: Any
    queue: str
    topic: str
    receipt: str


@pytest.fixture
def world() -> Iterator[World]:
    limits.install()  # tests/conftest.py installed them already: a no-op, as it must be
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        sns = boto3.client("sns", region_name=REGION)
        ddb = boto3.client("dynamodb", region_name=REGION)
        events = boto3.client("events", region_name=REGION)
        queue = sqs.create_queue(QueueName="q")["QueueUrl"]
        sqs.send_message(QueueUrl=queue, MessageBody="seed")
        receipt = sqs.receive_message(QueueUrl=queue)["Messages"][0]["ReceiptHandle"]
        topic = sns.create_topic(Name="t")["TopicArn"]
        ddb.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield World(sqs, sns, ddb, events, queue, topic, receipt)


def attributes(n: int) -> dict[str, Any]:
    return {f"a{i}": {"DataType": "String", "StringValue": "v"} for i in range(n)}


def _items(n: int) -> list[dict[str, Any]]:
    return [{"PutRequest": {"Item": {"pk": {"S": str(i)}}}} for i in range(n)]


Call = Callable[[World], Any]
# (rule, the request AWS refuses, AWS's error code, the same request at the limit)
CASES: list[tuple[str, Call, str, Call]] = [
    (
        "SQS body characters",
        lambda w: w.sqs.send_message(QueueUrl=w.queue, MessageBody="a\x00b"),
        "InvalidMessageContents",
        lambda w: w.sqs.send_message(QueueUrl=w.queue, MessageBody="a\tb\U0001f600"),
    ),
    (
        "SQS empty body",
        lambda w: w.sqs.send_message(QueueUrl=w.queue, MessageBody=""),
        "MissingParameter",
        lambda w: w.sqs.send_message(QueueUrl=w.queue, MessageBody="x"),
    ),
    (
        "SQS at most 10 message attributes",
        lambda w: w.sqs.send_message(QueueUrl=w.queue, MessageBody="x", MessageAttributes=attributes(11)),
        "InvalidParameterValue",
        lambda w: w.sqs.send_message(QueueUrl=w.queue, MessageBody="x", MessageAttributes=attributes(10)),
    ),
    (
        "SQS reserved attribute names",
        lambda w: w.sqs.send_message(
            QueueUrl=w.queue,
            MessageBody="x",
            MessageAttributes={"AWS.trace": {"DataType": "String", "StringValue": "v"}},
        ),
        "InvalidParameterValue",
        lambda w: w.sqs.send_message(
            QueueUrl=w.queue,
            MessageBody="x",
            MessageAttributes={"relay.trace": {"DataType": "String", "StringValue": "v"}},
        ),
    ),
    (
        "SQS empty attribute value",
        lambda w: w.sqs.send_message(
            QueueUrl=w.queue,
            MessageBody="x",
            MessageAttributes={"a": {"DataType": "String", "StringValue": ""}},
        ),
        "InvalidParameterValue",
        lambda w: w.sqs.send_message(
            QueueUrl=w.queue,
            MessageBody="x",
            MessageAttributes={"a": {"DataType": "Number", "StringValue": "0"}},
        ),
    ),
    (
        "SQS attributes count toward the message size",
        lambda w: w.sqs.send_message(
            QueueUrl=w.queue,
            MessageBody="x" * (1024 * 1024 - 10),
            MessageAttributes={"a": {"DataType": "String", "StringValue": "y" * 20}},
        ),
        "InvalidParameterValue",
        lambda w: w.sqs.send_message(QueueUrl=w.queue, MessageBody="x" * (1024 * 1024)),
    ),
    (
        "SQS DeleteMessageBatch at most 10 entries",
        lambda w: w.sqs.delete_message_batch(
            QueueUrl=w.queue, Entries=[{"Id": str(i), "ReceiptHandle": f"h{i}"} for i in range(11)]
        ),
        "TooManyEntriesInBatchRequest",
        lambda w: w.sqs.delete_message_batch(
            QueueUrl=w.queue, Entries=[{"Id": "0", "ReceiptHandle": w.receipt}]
        ),
    ),
    (
        "SQS ChangeMessageVisibilityBatch at most 10 entries",
        lambda w: w.sqs.change_message_visibility_batch(
            QueueUrl=w.queue,
            Entries=[{"Id": str(i), "ReceiptHandle": f"h{i}", "VisibilityTimeout": 1} for i in range(11)],
        ),
        "TooManyEntriesInBatchRequest",
        lambda w: w.sqs.change_message_visibility_batch(
            QueueUrl=w.queue, Entries=[{"Id": "0", "ReceiptHandle": w.receipt, "VisibilityTimeout": 1}]
        ),
    ),
    (
        "SQS batch entry ids",
        lambda w: w.sqs.change_message_visibility_batch(
            QueueUrl=w.queue, Entries=[{"Id": "a.b", "ReceiptHandle": w.receipt, "VisibilityTimeout": 1}]
        ),
        "InvalidBatchEntryId",
        lambda w: w.sqs.change_message_visibility_batch(
            QueueUrl=w.queue,
            Entries=[{"Id": "a-b_" + "c" * 76, "ReceiptHandle": w.receipt, "VisibilityTimeout": 1}],
        ),
    ),
    (
        "SNS empty message",
        lambda w: w.sns.publish(TopicArn=w.topic, Message=""),
        "InvalidParameter",
        lambda w: w.sns.publish(TopicArn=w.topic, Message="x"),
    ),
    (
        "SNS PublishBatch at most 256 KB in all",
        lambda w: w.sns.publish_batch(
            TopicArn=w.topic,
            PublishBatchRequestEntries=[{"Id": str(i), "Message": "x" * (100 * 1024)} for i in range(3)],
        ),
        "BatchRequestTooLong",
        lambda w: w.sns.publish_batch(
            TopicArn=w.topic,
            PublishBatchRequestEntries=[{"Id": str(i), "Message": "x" * (64 * 1024)} for i in range(4)],
        ),
    ),
    (
        "SNS batch entry ids",
        lambda w: w.sns.publish_batch(
            TopicArn=w.topic, PublishBatchRequestEntries=[{"Id": "a.b", "Message": "x"}]
        ),
        "InvalidBatchEntryId",
        lambda w: w.sns.publish_batch(
            TopicArn=w.topic, PublishBatchRequestEntries=[{"Id": "a-b", "Message": "x"}]
        ),
    ),
    (
        "DynamoDB unused expression attribute values",
        lambda w: w.ddb.put_item(
            TableName="t",
            Item={"pk": {"S": "a"}},
            ConditionExpression="attribute_not_exists(pk)",
            ExpressionAttributeValues={":unused": {"S": "x"}},
        ),
        "ValidationException",
        lambda w: w.ddb.put_item(
            TableName="t",
            Item={"pk": {"S": "a2"}},
            ConditionExpression="attribute_not_exists(pk) OR v = :used",
            ExpressionAttributeValues={":used": {"S": "x"}},
        ),
    ),
    (
        "DynamoDB unused placeholders in a transaction",
        lambda w: w.ddb.transact_write_items(
            TransactItems=[
                {
                    "Put": {
                        "TableName": "t",
                        "Item": {"pk": {"S": "b"}},
                        "ConditionExpression": "attribute_not_exists(pk)",
                        "ExpressionAttributeValues": {":unused": {"S": "x"}},
                    }
                }
            ]
        ),
        "ValidationException",
        lambda w: w.ddb.transact_write_items(
            TransactItems=[
                {
                    "Put": {
                        "TableName": "t",
                        "Item": {"pk": {"S": "b2"}},
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                }
            ]
        ),
    ),
    (
        "DynamoDB expressions at most 4 KB",
        lambda w: w.ddb.put_item(
            TableName="t",
            Item={"pk": {"S": "c"}},
            ConditionExpression="attribute_not_exists(pk)" + " " * 4073,
        ),
        "ValidationException",
        lambda w: w.ddb.put_item(
            TableName="t",
            Item={"pk": {"S": "c2"}},
            ConditionExpression="attribute_not_exists(pk)" + " " * 4072,
        ),
    ),
    (
        "DynamoDB numbers of at most 38 significant digits",
        lambda w: w.ddb.put_item(TableName="t", Item={"pk": {"S": "d"}, "n": {"N": "1" * 39}}),
        "ValidationException",
        lambda w: w.ddb.put_item(TableName="t", Item={"pk": {"S": "d"}, "n": {"N": "1" * 38 + "000"}}),
    ),
    (
        "DynamoDB BatchWriteItem at most 25 requests",
        lambda w: w.ddb.batch_write_item(RequestItems={"t": _items(26)}),
        "ValidationException",
        lambda w: w.ddb.batch_write_item(RequestItems={"t": _items(25)}),
    ),
    (
        "EventBridge PutEvents entries under 256 KB in all",
        lambda w: w.events.put_events(
            Entries=[{"Source": "s", "DetailType": "d", "Detail": json.dumps({"x": "y" * (130 * 1024)})}] * 2
        ),
        "ValidationException",
        lambda w: w.events.put_events(
            Entries=[{"Source": "s", "DetailType": "d", "Detail": json.dumps({"x": "y" * (120 * 1024)})}] * 2
        ),
    ),
]


def _code(call: Call, world: World) -> str | None:
    try:
        call(world)
    except ClientError as exc:
        return str(exc.response["Error"]["Code"]).removeprefix("AWS.SimpleQueueService.")
    return None


@pytest.mark.parametrize(("rule", "refused", "code", "at_limit"), CASES, ids=[c[0] for c in CASES])
def test_the_emulator_refuses_what_aws_refuses_and_moto_alone_accepts(
    world: World, rule: str, refused: Call, code: str, at_limit: Call
) -> None:
    with limits.suspended():
        assert _code(refused, world) != code, f"{rule}: moto alone already refuses it; the rule is moto's"
    assert _code(refused, world) == code, rule
    assert _code(at_limit, world) is None, f"{rule}: the request at the limit passes"


def test_installing_twice_wraps_once() -> None:
    from moto.sqs.responses import SQSResponse

    before = SQSResponse.send_message
    remove = limits.install()
    assert SQSResponse.send_message is before
    remove()
    assert SQSResponse.send_message is before


def test_the_emulator_process_enforces_the_limits() -> None:
    """The wiring: the emulator's moto server refuses them too (installed in its process)."""
    from emulator.server import Emulator, client, free_port

    emulator = Emulator(free_port())
    emulator.start()
    try:
        sqs = client("sqs", emulator.endpoint)
        queue = sqs.create_queue(QueueName="limits")["QueueUrl"]
        with pytest.raises(ClientError) as refused:
            sqs.send_message(QueueUrl=queue, MessageBody="a\x00b")
        assert refused.value.response["Error"]["Code"] == "InvalidMessageContents"
        ddb = client("dynamodb", emulator.endpoint)
        ddb.create_table(
            TableName="limits",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        with pytest.raises(ClientError) as unused:
            ddb.put_item(
                TableName="limits",
                Item={"pk": {"S": "a"}},
                ConditionExpression="attribute_not_exists(pk)",
                ExpressionAttributeValues={":x": {"S": "x"}},
            )
        assert "unused in expressions" in unused.value.response["Error"]["Message"]
    finally:
        emulator.stop()
