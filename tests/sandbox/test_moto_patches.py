"""The emulator's patches (``local.moto_patches``) against moto's own behaviour. The fast JSON path
(patch 6) answers exactly what moto's own model-driven serializer answers: a DynamoDB workload
covering every attribute type, return values, consumed capacity, pagination, batches, transactions
and stream records runs with both, response by response. TransactWriteItems without table snapshots
(patch 2) is all-or-nothing, items and stream records, and agrees with moto's own implementation."""

from __future__ import annotations

import os
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import boto3
import pytest
from moto import mock_aws

from local import moto_patches


@pytest.fixture
def verified() -> Iterator[list[tuple[str, str, Any, Any]]]:
    os.environ["AWS_ACCOUNT_ID_ENDPOINT_MODE"] = "disabled"
    remove = moto_patches.fast_json_results()
    moto_patches.VERIFY_FAST_JSON = []
    try:
        yield moto_patches.VERIFY_FAST_JSON
    finally:
        moto_patches.VERIFY_FAST_JSON = None
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

    # boto3 parsed the fast responses into what it parses for DynamoDB (a sanity check of the path).
    assert {r["eventName"] for r in records} == {"INSERT", "MODIFY", "REMOVE"}
    assert records[0]["dynamodb"]["NewImage"]["blob"]["B"] == b"\x00\x01binary\xff"
    assert isinstance(records[0]["dynamodb"]["ApproximateCreationDateTime"].year, int)
    assert Decimal(records[-1]["dynamodb"]["OldImage"]["amount"]["N"]) == Decimal("10.50")

    import json

    operations = {(service, op) for service, op, _, _ in verified}
    assert operations == moto_patches.FAST_JSON_OPERATIONS
    for service, op, fast, slow in verified:
        status, headers, body = slow
        assert fast == (status, headers, json.loads(body)), (service, op, fast, slow)


def test_sqs_patch_keeps_visibility_delay_retention_and_the_queue_attributes() -> None:
    """Patch 7 reads time and the retention period directly; moto's own answers are the reference."""
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.sqs.models import sqs_backends

    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="q", Attributes={"MessageRetentionPeriod": "60"})["QueueUrl"]
        for i in range(6):
            sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
        sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=30)
        in_flight = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2, VisibilityTimeout=30)
        queue = sqs_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].queues["q"]
        expired = next(m for m in queue._messages if m.body == "m5")
        expired.sent_timestamp -= 120_000  # sent two minutes ago: past the 60 s retention
        names = [["All"], ["ApproximateNumberOfMessages", "QueueArn"], ["ApproximateNumberOfMessagesDelayed"]]
        unpatched = [sqs.get_queue_attributes(QueueUrl=url, AttributeNames=n)["Attributes"] for n in names]
        remove = moto_patches.fast_sqs()
        try:
            patched = [sqs.get_queue_attributes(QueueUrl=url, AttributeNames=n)["Attributes"] for n in names]
            received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30)
        finally:
            remove()
    assert patched == unpatched
    assert unpatched[1]["ApproximateNumberOfMessages"] == "4"  # 6 sent, 2 in flight; the delayed one apart
    assert unpatched[2] == {"ApproximateNumberOfMessagesDelayed": "1"}
    bodies = sorted(m["Body"] for m in received["Messages"])
    taken = {m["Body"] for m in in_flight["Messages"]}
    # Not the in-flight ones, not the delayed one, not the one past its retention period.
    assert bodies == sorted({"m0", "m1", "m2", "m3", "m4"} - taken)


def test_a_table_query_reads_its_partition_alone_and_answers_what_moto_answers() -> None:
    """Patch 12: every kind of Query, with and without the patch, response by response; no Query lists
    the whole table sorted, a Scan still does."""
    from moto.dynamodb.models.table import Table

    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(
            TableName="t",
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                *({"AttributeName": a, "AttributeType": "S"} for a in ("pk", "sk", "gpk")),
                {"AttributeName": "gn", "AttributeType": "N"},
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "by-g",
                    "KeySchema": [{"AttributeName": "gpk", "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "ALL"},
                },
                {  # the deadline index's shape: a shard, and a moment to compare with
                    "IndexName": "by-g-n",
                    "KeySchema": [
                        {"AttributeName": "gpk", "KeyType": "HASH"},
                        {"AttributeName": "gn", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                },
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        ddb.create_table(
            TableName="h",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        for p in range(8):
            ddb.put_item(TableName="h", Item={"pk": {"S": f"P{p}"}, "n": {"N": str(p)}})
            for r in range(12):
                item = {"pk": {"S": f"P{p}"}, "sk": {"S": f"R#{r:02d}"}, "n": {"N": str(r)}}
                if r % 3 == 0:
                    item["gpk"], item["gn"] = {"S": f"G{r % 2}"}, {"N": str(p % 5)}
                ddb.put_item(TableName="t", Item=item)
        queries: list[dict[str, Any]] = [
            {
                "TableName": "t",
                "KeyConditionExpression": "pk = :p",
                "ExpressionAttributeValues": {":p": {"S": "P3"}},
            },
            {
                "TableName": "t",
                "KeyConditionExpression": "pk = :p",
                "ExpressionAttributeValues": {":p": {"S": "P9"}},
            },
            {
                "TableName": "t",
                "KeyConditionExpression": "pk = :p AND begins_with(sk, :s)",
                "ExpressionAttributeValues": {":p": {"S": "P1"}, ":s": {"S": "R#0"}},
                "ScanIndexForward": False,
            },
            {
                "TableName": "t",
                "KeyConditionExpression": "pk = :p AND sk BETWEEN :a AND :b",
                "ExpressionAttributeValues": {
                    ":p": {"S": "P2"},
                    ":a": {"S": "R#03"},
                    ":b": {"S": "R#08"},
                    ":n": {"N": "4"},
                },
                "FilterExpression": "n > :n",
                "ProjectionExpression": "sk, n",
            },
            {
                "TableName": "t",
                "KeyConditionExpression": "pk = :p",
                "ExpressionAttributeValues": {":p": {"S": "P4"}},
                "Select": "COUNT",
            },
            {
                "TableName": "t",
                "IndexName": "by-g",
                "KeyConditionExpression": "gpk = :g",
                "ExpressionAttributeValues": {":g": {"S": "G0"}},
            },
            {
                "TableName": "t",
                "IndexName": "by-g-n",
                "KeyConditionExpression": "gpk = :g AND gn <= :n",
                "ExpressionAttributeValues": {":g": {"S": "G1"}, ":n": {"N": "2"}},
            },
            {
                "TableName": "h",
                "KeyConditionExpression": "pk = :p",
                "ExpressionAttributeValues": {":p": {"S": "P5"}},
            },
        ]

        def run_all() -> list[Any]:
            answers: list[Any] = []
            for query in queries:
                answers.append({k: v for k, v in ddb.query(**query).items() if k != "ResponseMetadata"})
                pages, start = [], None  # the same query a page of 5 at a time
                while True:
                    extra = {"ExclusiveStartKey": start} if start else {}
                    page = ddb.query(**query, Limit=5, **extra)
                    pages.append((page.get("Items"), page.get("Count")))
                    start = page.get("LastEvaluatedKey")
                    if not start:
                        break
                answers.append(pages)
            answers.append(ddb.scan(TableName="t", Limit=7)["Items"])
            return answers

        unpatched = run_all()
        listed: list[str] = []  # every listing of a whole table, under the patch
        whole_table = Table.all_items

        def counted(table: Any) -> Any:
            listed.append(table.name)
            return whole_table(table)

        Table.all_items = counted  # type: ignore[method-assign]
        remove = moto_patches.partition_query()
        try:
            patched = run_all()
            del listed[:]
            ddb.query(**queries[0])
            ddb.query(**queries[-1])
            assert listed == []  # table queries list no whole table
            ddb.query(**queries[-2])  # an index query lists every item, unsorted
            assert listed == []
            ddb.scan(TableName="h")
            assert listed == ["h"]  # a scan keeps moto's path
        finally:
            remove()
            Table.all_items = whole_table  # type: ignore[method-assign]
    assert patched == unpatched
    assert [len(a["Items"]) for a in unpatched[0:1]] == [12] and unpatched[2]["Items"] == []
    assert [i["sk"]["S"] for i in unpatched[4]["Items"]] == [
        "R#09",
        "R#08",
        "R#07",
        "R#06",
        "R#05",
        "R#04",
        "R#03",
        "R#02",
        "R#01",
        "R#00",
    ]
    assert getattr(moto_patches._PARTITION, "key", None) is None


def test_the_emulator_keeps_connections_open_and_request_bodies_never_leak_into_the_next_request() -> None:
    """Patch 8, on the real emulator process: several requests (with bodies read or not by moto)
    on one HTTP/1.1 connection, and `Connection: close` still honoured."""
    import http.client

    from local.emulator import Emulator, free_port

    emulator = Emulator(free_port())
    emulator.start()
    try:
        auth = (
            "AWS4-HMAC-SHA256 Credential=testing/20261201/us-east-1/{}/aws4_request, "
            "SignedHeaders=host, Signature=0"
        )
        conn = http.client.HTTPConnection("127.0.0.1", emulator.port, timeout=10)

        def call(method: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes, bool]:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, response.read(), response.will_close

        ddb = {
            "X-Amz-Target": "DynamoDB_20120810.ListTables",
            "Content-Type": "application/x-amz-json-1.0",
            "Authorization": auth.format("dynamodb"),
        }
        s3 = {"Authorization": auth.format("s3"), "Host": f"127.0.0.1:{emulator.port}"}
        status, body, closes = call("POST", "/", b"{}", ddb)
        assert (status, closes) == (200, False) and b"TableNames" in body
        sock = conn.sock
        # A body moto answers without reading (no such bucket), then a normal request: the unread
        # body must not be taken for the next request line.
        status, _, closes = call("PUT", "/no-such-bucket/key", b"x" * 70_000, s3)
        assert (status, closes) == (404, False)
        for _ in range(3):
            status, body, closes = call("POST", "/", b"{}", ddb)
            assert (status, closes) == (200, False) and b"TableNames" in body
        assert conn.sock is sock  # one connection throughout
        status, _, closes = call("POST", "/", b"{}", {**ddb, "Connection": "close"})
        assert (status, closes) == (200, True)
        conn.close()
    finally:
        emulator.stop()


def test_backend_lookup_without_the_lock_returns_motos_backends_and_still_creates_new_accounts() -> None:
    from moto.core.base_backend import BackendDict
    from moto.dynamodb.models import dynamodb_backends

    remove = moto_patches.lock_free_backend_lookup()
    try:
        with mock_aws():
            account = "210987654321"  # not created before: goes through moto's own path
            first = dynamodb_backends[account]["us-east-1"]
            assert dynamodb_backends[account]["us-east-1"] is first  # the fast path: same backend
            assert dynamodb_backends in BackendDict._instances
            boto3.client("dynamodb", region_name="us-east-1").list_tables()
    finally:
        remove()


# Patch 2: TransactWriteItems all-or-nothing without moto's table snapshots.


@pytest.fixture(autouse=True)
def _no_account_endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    # botocore would address DynamoDB by account (<account>.ddb...), which moto does not route.
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")


def _table_with_stream(ddb: Any) -> Any:
    """Table "t" (hash key pk) with a NEW_AND_OLD_IMAGES stream; returns a function that lists the
    stream's records so far, without the fields that differ run to run (event id, timestamp)."""
    ddb.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    streams = boto3.client("dynamodbstreams", region_name="us-east-1")
    arn = ddb.describe_table(TableName="t")["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]

    def records() -> list[tuple[Any, ...]]:
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")[
            "ShardIterator"
        ]
        found: list[tuple[Any, ...]] = []
        while page := streams.get_records(ShardIterator=iterator)["Records"]:
            found += [
                (
                    r["eventName"],
                    r["dynamodb"]["SequenceNumber"],
                    r["dynamodb"]["Keys"],
                    r["dynamodb"].get("OldImage"),
                    r["dynamodb"].get("NewImage"),
                )
                for r in page
            ]
            iterator = streams.get_shard_iterator(
                StreamArn=arn,
                ShardId=shard,
                ShardIteratorType="AFTER_SEQUENCE_NUMBER",
                SequenceNumber=page[-1]["dynamodb"]["SequenceNumber"],
            )["ShardIterator"]
        return found

    return records


def _items(ddb: Any) -> list[dict[str, Any]]:
    return sorted(ddb.scan(TableName="t", ConsistentRead=True)["Items"], key=lambda i: str(i["pk"]["S"]))


def _outcome(ddb: Any, transact_items: list[dict[str, Any]]) -> dict[str, Any]:
    """What a client sees of one TransactWriteItems: the error (code, message, reasons), if any."""
    from botocore.exceptions import ClientError

    try:
        ddb.transact_write_items(TransactItems=transact_items)
    except ClientError as e:
        error = e.response["Error"]
        return {
            "code": error["Code"],
            "message": error["Message"],
            "reasons": e.response.get("CancellationReasons"),
        }
    return {"code": None}


def _seed(ddb: Any) -> None:
    for item in (
        {"pk": {"S": "counter"}, "n": {"N": "1"}, "steps": {"L": [{"S": "a"}]}},
        {"pk": {"S": "label"}, "n": {"S": "ten"}, "tags": {"SS": ["x"]}},
        {"pk": {"S": "doomed"}, "note": {"S": "delete me"}},
        {"pk": {"S": "guard"}, "state": {"S": "OPEN"}},
        {"pk": {"S": "large"}, "blob": {"S": "y" * 300_000}},
    ):
        ddb.put_item(TableName="t", Item=item)


def _earlier_writes() -> list[dict[str, Any]]:
    """Four actions that pass: a conditional Put of a new item, an Update, a Delete, a ConditionCheck."""
    return [
        {
            "Put": {
                "TableName": "t",
                "Item": {"pk": {"S": "new"}, "kind": {"S": "outbox"}},
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        },
        {
            "Update": {
                "TableName": "t",
                "Key": {"pk": {"S": "counter"}},
                "UpdateExpression": "SET n = n + :one, steps = list_append(steps, :step)",
                "ExpressionAttributeValues": {":one": {"N": "1"}, ":step": {"L": [{"S": "b"}]}},
            }
        },
        {"Delete": {"TableName": "t", "Key": {"pk": {"S": "doomed"}}}},
        {
            "ConditionCheck": {
                "TableName": "t",
                "Key": {"pk": {"S": "guard"}},
                "ConditionExpression": "#s = :open",
                "ExpressionAttributeNames": {"#s": "state"},
                "ExpressionAttributeValues": {":open": {"S": "OPEN"}},
            }
        },
    ]


def _update(key: str, expression: str, values: dict[str, Any]) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": "t",
            "Key": {"pk": {"S": key}},
            "UpdateExpression": expression,
            "ExpressionAttributeValues": values,
        }
    }


ONE = {":one": {"N": "1"}}
INVALID_FOR_THE_STORED_ITEM = {
    "arithmetic on a string": (
        _update("label", "SET n = n + :one", ONE),
        "Invalid UpdateExpression: Incorrect operand type for operator or function; operator or function: +, "
        "operand type: S",
    ),
    "ADD to a string": (
        _update("label", "ADD n :one", ONE),
        "An operand in the update expression has an incorrect data type",
    ),
    "ADD a number to a string set": (
        _update("label", "ADD tags :one", ONE),
        "An operand in the update expression has an incorrect data type",
    ),
    "list_append on a string": (
        _update("label", "SET n = list_append(n, :l)", {":l": {"L": [{"S": "z"}]}}),
        "Invalid UpdateExpression: Incorrect operand type for operator or function; operator or function: "
        "list_append, operand type: S",
    ),
    "an attribute the expression reads is missing": (
        _update("label", "SET visits = visits + :one", ONE),
        "The provided expression refers to an attribute that does not exist in the item",
    ),
    "the updated item over 400 KB": (
        _update("large", "SET more = :more", {":more": {"S": "z" * 200_000}}),
        "Item size to update has exceeded the maximum allowed size",
    ),
}


@pytest.mark.parametrize("failing", list(INVALID_FOR_THE_STORED_ITEM), ids=list(INVALID_FOR_THE_STORED_ITEM))
def test_a_write_failing_after_the_conditions_passed_cancels_the_whole_transaction(failing: str) -> None:
    """DynamoDB's answer: TransactionCanceledException, the failing action's reason ValidationError with
    the single write's message, None for the others; no item and no stream record of the earlier
    writes (moto's own implementation answers a bare ValidationException here, also with nothing
    applied -- see the next test)."""
    update, message = INVALID_FOR_THE_STORED_ITEM[failing]
    with moto_patches.fast_atomic_dynamodb(), mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        records = _table_with_stream(ddb)
        _seed(ddb)
        items_before, records_before = _items(ddb), records()

        outcome = _outcome(ddb, [*_earlier_writes(), update])

        assert _items(ddb) == items_before
        assert records() == records_before
        assert outcome == {
            "code": "TransactionCanceledException",
            "message": "Transaction cancelled, please refer cancellation reasons for specific reasons "
            "[None, None, None, None, ValidationError]",
            "reasons": [{"Code": "None"}] * 4 + [{"Code": "ValidationError", "Message": message}],
        }
        # The same actions without the failing one commit, each stream record once, in request order.
        assert _outcome(ddb, _earlier_writes()) == {"code": None}
        added = records()[len(records_before) :]
        assert [(name, keys["pk"]["S"]) for name, _, keys, _, _ in added] == [
            ("INSERT", "new"),
            ("MODIFY", "counter"),
            ("REMOVE", "doomed"),
        ]
        assert added[1][4] == {
            "pk": {"S": "counter"},
            "n": {"N": "2"},
            "steps": {"L": [{"S": "a"}, {"S": "b"}]},
        }


def _transactions_run_by(patched: bool, transactions: list[list[dict[str, Any]]]) -> list[Any]:
    """Each transaction's outcome, and the table and its stream after it."""
    import contextlib

    seen: list[Any] = []
    with moto_patches.fast_atomic_dynamodb() if patched else contextlib.nullcontext(), mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        records = _table_with_stream(ddb)
        _seed(ddb)
        for transact_items in transactions:
            seen.append((_outcome(ddb, transact_items), _items(ddb), records()))
    return seen


def test_the_patch_and_motos_own_implementation_agree_on_each_transactions_outcome() -> None:
    """moto's own TransactWriteItems (table snapshots, rollback) is the reference for the outcome,
    the items and the stream records, save one deliberate difference: for a write invalid for the
    stored item moto answers a bare ValidationException, the patch DynamoDB's cancellation."""
    condition_failed = [
        {
            "Put": {
                "TableName": "t",
                "Item": {"pk": {"S": "new"}, "kind": {"S": "again"}},
                "ConditionExpression": "attribute_not_exists(pk)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        },
        _update("counter", "SET n = n + :one", ONE),
        {
            "ConditionCheck": {
                "TableName": "t",
                "Key": {"pk": {"S": "guard"}},
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        },
    ]
    invalid_as_sent = [  # refused as a whole (ValidationException) by both, after a passing Put
        {"Put": {"TableName": "t", "Item": {"pk": {"S": "other"}}}},
        _update("counter", "SET n = :undefined", ONE),
    ]
    oversized_put = [
        _update("counter", "SET n = n + :one", ONE),
        {"Put": {"TableName": "t", "Item": {"pk": {"S": "huge"}, "blob": {"S": "x" * 410_000}}}},
    ]
    invalid_for_the_stored_item = [
        {"Put": {"TableName": "t", "Item": {"pk": {"S": "other"}}}},
        _update("label", "SET n = n + :one", ONE),
    ]
    transactions = [
        _earlier_writes(),
        condition_failed,
        invalid_as_sent,
        oversized_put,
        invalid_for_the_stored_item,
        [
            _update("counter", "ADD n :one", ONE),
            {"Delete": {"TableName": "t", "Key": {"pk": {"S": "absent"}}}},
        ],
    ]
    motos = _transactions_run_by(False, transactions)
    patched = _transactions_run_by(True, transactions)

    assert [outcome["code"] for outcome, _, _ in patched] == [
        None,
        "TransactionCanceledException",
        "ValidationException",
        "ValidationException",
        "TransactionCanceledException",
        None,
    ]
    assert patched[1][0]["reasons"] == [
        {
            "Code": "ConditionalCheckFailed",
            "Message": "The conditional request failed",
            "Item": {"pk": {"S": "new"}, "kind": {"S": "outbox"}},
        },
        {"Code": "None"},
        {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"},
    ]
    for index, (ours, theirs) in enumerate(zip(patched, motos, strict=True)):
        assert ours[1:] == theirs[1:], f"transaction {index}: items or stream records differ"
        if index != transactions.index(invalid_for_the_stored_item):
            assert ours[0] == theirs[0], f"transaction {index}"
    ours_error, theirs_error = patched[4][0], motos[4][0]
    assert theirs_error["code"] == "ValidationException"
    assert ours_error["reasons"] == [
        {"Code": "None"},
        {"Code": "ValidationError", "Message": theirs_error["message"]},
    ]


def test_an_update_that_creates_its_item_emits_one_insert_with_the_new_image() -> None:
    """As DynamoDB does; moto's own UpdateItem emits a key-only INSERT, then a MODIFY."""
    with moto_patches.fast_atomic_dynamodb(), mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        records = _table_with_stream(ddb)
        ddb.transact_write_items(TransactItems=[_update("fresh", "SET n = :one", ONE)])
        assert [(name, old, new) for name, _, _, old, new in records()] == [
            ("INSERT", None, {"pk": {"S": "fresh"}, "n": {"N": "1"}})
        ]


def test_a_read_waits_for_a_write_in_progress() -> None:
    """Reads take the writes' lock (patch 3): a GetItem cannot land in the middle of a commit."""
    import threading

    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    with moto_patches.fast_atomic_dynamodb(), mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        _table_with_stream(ddb)
        backend = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
        read: list[Any] = []
        reader = threading.Thread(target=lambda: read.append(backend.get_item("t", {"pk": {"S": "k"}})))
        with moto_patches._WRITE_LOCK:  # a write holding the lock: it commits before the read returns
            reader.start()
            reader.join(0.2)
            assert reader.is_alive() and not read
            backend.put_item("t", {"pk": {"S": "k"}, "v": {"S": "committed"}})
        reader.join(5)
        assert read[0].to_json()["Attributes"]["v"] == {"S": "committed"}


def test_a_transaction_retried_with_its_client_request_token_succeeds_and_applies_once() -> None:
    """botocore keeps a call's ClientRequestToken across its retries: a retry of a transaction that
    committed (its reply lost) must succeed without applying it again, as on DynamoDB."""
    with moto_patches.fast_atomic_dynamodb(), mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        items: list[Any] = [
            {
                "Put": {
                    "TableName": "t",
                    "Item": {"pk": {"S": "a"}},
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            {
                "Update": {
                    "TableName": "t",
                    "Key": {"pk": {"S": "counter"}},
                    "UpdateExpression": "ADD n :one",
                    "ExpressionAttributeValues": {":one": {"N": "1"}},
                }
            },
        ]
        ddb.transact_write_items(TransactItems=items, ClientRequestToken="token-1")
        ddb.transact_write_items(TransactItems=items, ClientRequestToken="token-1")  # the retry
        counter = ddb.get_item(TableName="t", Key={"pk": {"S": "counter"}})["Item"]
        assert counter["n"] == {"N": "1"}
        with pytest.raises(ddb.exceptions.TransactionCanceledException):
            ddb.transact_write_items(TransactItems=items, ClientRequestToken="token-2")  # a new call
        with pytest.raises(ddb.exceptions.IdempotentParameterMismatchException):
            ddb.transact_write_items(TransactItems=items[1:], ClientRequestToken="token-1")
        assert ddb.get_item(TableName="t", Key={"pk": {"S": "counter"}})["Item"]["n"] == {"N": "1"}


# Patch 13: update expressions validated without moto's deep copy of the AST.


def _update_workload(patched: bool) -> list[Any]:
    """UpdateItems of every kind (creating, nested, failing on types or conditions), alone and in
    transactions; returns every answer or error code and the table's final items."""
    from botocore.exceptions import ClientError

    remove = moto_patches.single_use_update_asts() if patched else None
    try:
        with moto_patches.fast_atomic_dynamodb(), mock_aws():
            ddb = boto3.client("dynamodb", region_name="us-east-1")
            _table_with_stream(ddb)
            updates: list[dict[str, Any]] = [
                {  # creates its item: validated twice (an empty item, then the created one)
                    "Key": {"pk": {"S": "a"}},
                    "UpdateExpression": "SET n = if_not_exists(n, :zero) + :one, tags = :tags",
                    "ExpressionAttributeValues": {
                        ":zero": {"N": "0"},
                        ":one": {"N": "1"},
                        ":tags": {"L": []},
                    },
                },
                {
                    "Key": {"pk": {"S": "a"}},
                    "UpdateExpression": (
                        "SET n = n + :one, tags = list_append(tags, :t), m.#k = :v REMOVE gone"
                    ),
                    "ExpressionAttributeNames": {"#k": "key"},
                    "ExpressionAttributeValues": {
                        ":one": {"N": "1"},
                        ":t": {"L": [{"S": "x"}]},
                        ":v": {"S": "v"},
                    },
                },
                {
                    "Key": {"pk": {"S": "a"}},
                    "UpdateExpression": "SET m = :m ADD c :two, s :set",
                    "ExpressionAttributeValues": {
                        ":m": {"M": {"key": {"S": "w"}}},
                        ":two": {"N": "2"},
                        ":set": {"SS": ["p", "q"]},
                    },
                },
                {  # a string plus a number: ValidationException
                    "Key": {"pk": {"S": "a"}},
                    "UpdateExpression": "SET m = m + :one",
                    "ExpressionAttributeValues": {":one": {"N": "1"}},
                },
                {  # a condition that fails
                    "Key": {"pk": {"S": "a"}},
                    "UpdateExpression": "SET n = :n",
                    "ConditionExpression": "n = :nope",
                    "ExpressionAttributeValues": {":n": {"N": "9"}, ":nope": {"N": "99"}},
                },
                {  # an attribute the expression needs is missing
                    "Key": {"pk": {"S": "b"}},
                    "UpdateExpression": "SET n = missing + :one",
                    "ExpressionAttributeValues": {":one": {"N": "1"}},
                },
            ]
            answers: list[Any] = []
            for update in updates * 2:  # the same expressions again: no state carried from the first
                try:
                    answer = ddb.update_item(TableName="t", ReturnValues="ALL_NEW", **update)
                    answers.append(answer.get("Attributes"))
                except ClientError as exc:
                    answers.append(exc.response["Error"]["Code"])
                try:
                    ddb.transact_write_items(
                        TransactItems=[
                            {
                                "Update": {
                                    "TableName": "t",
                                    **update,
                                    "Key": {"pk": {"S": "t-" + update["Key"]["pk"]["S"]}},
                                }
                            }
                        ]
                    )
                    answers.append("committed")
                except ClientError as exc:
                    answers.append(
                        (
                            exc.response["Error"]["Code"],
                            [r.get("Code") for r in exc.response.get("CancellationReasons", [])],
                        )
                    )
            answers.append(sorted(map(str, ddb.scan(TableName="t")["Items"])))
            return answers
    finally:
        if remove is not None:
            remove()


def test_update_expressions_validated_without_the_ast_copy_answer_what_moto_answers() -> None:
    from moto.dynamodb.parsing import validators

    copied: list[int] = []
    original = validators.deepcopy
    validators.deepcopy = lambda node: copied.append(1) or original(node)  # type: ignore[assignment]
    try:
        unpatched = _update_workload(patched=False)
        moto_copies = len(copied)
        del copied[:]
        patched = _update_workload(patched=True)
    finally:
        validators.deepcopy = original  # type: ignore[assignment]
    assert patched == unpatched
    assert "ValidationException" in unpatched and "ConditionalCheckFailedException" in unpatched
    # moto copied the AST for each of the 22 validations, and the list list_append extends (twice);
    # now only that list is copied.
    assert (moto_copies, len(copied)) == (24, 2)
