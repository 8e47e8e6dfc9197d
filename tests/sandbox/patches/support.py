"""What the patch tests share: moto with some patches installed, and a DynamoDB table with a stream
to run transactions against (items and stream records read back without the fields that differ run
to run)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import boto3
from moto import mock_aws

Install = Callable[[], Callable[[], None]]


@contextmanager
def installed(*installs: Install) -> Iterator[None]:
    """The patches whose ``install`` functions are given, for the block; removed in reverse order."""
    removes = [install() for install in installs]
    try:
        yield
    finally:
        for remove in reversed(removes):
            remove()


def table_with_stream(ddb: Any) -> Callable[[], list[tuple[Any, ...]]]:
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


def items(ddb: Any) -> list[dict[str, Any]]:
    return sorted(ddb.scan(TableName="t", ConsistentRead=True)["Items"], key=lambda i: str(i["pk"]["S"]))


def outcome(ddb: Any, transact_items: list[dict[str, Any]]) -> dict[str, Any]:
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


def seed(ddb: Any) -> None:
    for item in (
        {"pk": {"S": "counter"}, "n": {"N": "1"}, "steps": {"L": [{"S": "a"}]}},
        {"pk": {"S": "label"}, "n": {"S": "ten"}, "tags": {"SS": ["x"]}},
        {"pk": {"S": "doomed"}, "note": {"S": "delete me"}},
        {"pk": {"S": "guard"}, "state": {"S": "OPEN"}},
        {"pk": {"S": "large"}, "blob": {"S": "y" * 300_000}},
    ):
        ddb.put_item(TableName="t", Item=item)


def earlier_writes() -> list[dict[str, Any]]:
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


def update(key: str, expression: str, values: dict[str, Any]) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": "t",
            "Key": {"pk": {"S": key}},
            "UpdateExpression": expression,
            "ExpressionAttributeValues": values,
        }
    }


ONE = {":one": {"N": "1"}}

# Six transactions against the seeded table, each of a kind: all pass; conditions fail; invalid as
# sent (after a passing Put); a Put over 400 KB; a write invalid for the stored item; an ADD and a
# Delete of a missing item.
CONDITION_FAILED = [
    {
        "Put": {
            "TableName": "t",
            "Item": {"pk": {"S": "new"}, "kind": {"S": "again"}},
            "ConditionExpression": "attribute_not_exists(pk)",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    },
    update("counter", "SET n = n + :one", ONE),
    {
        "ConditionCheck": {
            "TableName": "t",
            "Key": {"pk": {"S": "guard"}},
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    },
]
INVALID_AS_SENT = [  # refused as a whole (ValidationException) by both, after a passing Put
    {"Put": {"TableName": "t", "Item": {"pk": {"S": "other"}}}},
    update("counter", "SET n = :undefined", ONE),
]
OVERSIZED_PUT = [
    update("counter", "SET n = n + :one", ONE),
    {"Put": {"TableName": "t", "Item": {"pk": {"S": "huge"}, "blob": {"S": "x" * 410_000}}}},
]
INVALID_FOR_THE_STORED_ITEM = [
    {"Put": {"TableName": "t", "Item": {"pk": {"S": "other"}}}},
    update("label", "SET n = n + :one", ONE),
]
TRANSACTIONS = [
    earlier_writes(),
    CONDITION_FAILED,
    INVALID_AS_SENT,
    OVERSIZED_PUT,
    INVALID_FOR_THE_STORED_ITEM,
    [
        update("counter", "ADD n :one", ONE),
        {"Delete": {"TableName": "t", "Key": {"pk": {"S": "absent"}}}},
    ],
]


def transactions_run_by(patches: Callable[[], AbstractContextManager[Any]]) -> list[Any]:
    """Each of TRANSACTIONS' outcome, and the table and its stream after it, with ``patches()`` in place."""
    seen: list[Any] = []
    with patches(), mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        records = table_with_stream(ddb)
        seed(ddb)
        for transact_items in TRANSACTIONS:
            seen.append((outcome(ddb, transact_items), items(ddb), records()))
    return seen


def assert_agrees_with_moto_but_cancels_a_write_invalid_for_the_stored_item(
    patched: list[Any], motos: list[Any]
) -> None:
    """moto's own TransactWriteItems (table snapshots, rollback) is the reference for the outcome,
    the items and the stream records, save one deliberate difference: for a write invalid for the
    stored item moto answers a bare ValidationException, the patch DynamoDB's cancellation."""
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
        if index != TRANSACTIONS.index(INVALID_FOR_THE_STORED_ITEM):
            assert ours[0] == theirs[0], f"transaction {index}"
    ours_error, theirs_error = patched[4][0], motos[4][0]
    assert theirs_error["code"] == "ValidationException"
    assert ours_error["reasons"] == [
        {"Code": "None"},
        {"Code": "ValidationError", "Message": theirs_error["message"]},
    ]
