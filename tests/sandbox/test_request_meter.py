"""The emulator's request meter bills each request as AWS does (``emulator.request_meter``): SQS and SNS
per 64 KB chunk, EventBridge per entry chunk, DynamoDB per write unit (1 KB, x2 in a transaction) and
read unit (4 KB; 0.5 eventually consistent, 2 transactional); empty receives and GetRecords apart."""

from __future__ import annotations

import json
from typing import Any

import pytest

from emulator.request_meter import WriteMeasure, _billed, _caller, _entries

KB = 1024


def _j(value: object) -> bytes:
    return json.dumps(value).encode()


@pytest.mark.parametrize(("size", "billed"), [(10, 1), (64 * KB, 1), (64 * KB + 1, 2), (200 * KB, 4)])
def test_an_sqs_send_is_billed_per_64_kb_chunk(size: int, billed: int) -> None:
    assert _billed("sqs", "SendMessage", _j({"MessageBody": "x" * size}), b"") == (billed, 0)


def test_a_batch_send_is_billed_by_its_total_payload_not_per_entry() -> None:
    entries = [{"Id": str(i), "MessageBody": "x" * 1000} for i in range(10)]
    assert _billed("sqs", "SendMessageBatch", _j({"Entries": entries}), b"") == (1, 0)


def test_an_empty_receive_is_billed_and_counted_as_idle_polling() -> None:
    assert _billed("sqs", "ReceiveMessage", b"{}", _j({})) == (1, 1)
    full = _j({"Messages": [{"Body": "x" * 100}] * 3})
    assert _billed("sqs", "ReceiveMessage", b"{}", full) == (1, 0)


def test_stream_reads_with_records_are_work_and_without_are_idle() -> None:
    assert _billed("dynamodbstreams", "GetRecords", b"{}", _j({"Records": [{"eventID": "1"}]})) == (1, 0)
    assert _billed("dynamodbstreams", "GetRecords", b"{}", _j({"Records": []})) == (1, 1)


def test_a_transaction_bills_two_write_units_per_kilobyte_of_each_item() -> None:
    small = {"Put": {"TableName": "t", "Item": {"pk": {"S": "a"}}}}
    large = {"Put": {"TableName": "t", "Item": {"pk": {"S": "b" * (2 * KB)}}}}
    update = {
        "Update": {
            "TableName": "t",
            "Key": {"pk": {"S": "c"}},
            "ExpressionAttributeValues": {":v": {"N": "1"}},
        }
    }
    billed, _ = _billed("dynamodb", "TransactWriteItems", _j({"TransactItems": [small, large, update]}), b"")
    assert billed == 2 + 2 * 3 + 2


def test_reads_bill_per_4_kb_read_half_for_eventually_consistent() -> None:
    item = {"Item": {"pk": {"S": "a" * (5 * KB)}}}
    assert _billed("dynamodb", "GetItem", _j({"ConsistentRead": True}), _j(item)) == (2, 0)
    assert _billed("dynamodb", "GetItem", _j({}), _j(item)) == (1.0, 0)
    # A read that finds nothing still costs its minimum unit.
    assert _billed("dynamodb", "GetItem", _j({"ConsistentRead": True}), _j({})) == (1, 0)
    assert _billed("dynamodb", "Query", _j({"ConsistentRead": True}), _j({"Items": []})) == (1, 0)


def test_put_events_is_billed_per_entry_chunk() -> None:
    entries = [{"Detail": "{}", "Source": "s", "DetailType": "d"}] * 3
    assert _billed("events", "PutEvents", _j({"Entries": entries}), b"") == (3, 0)


def test_a_batchs_entries_are_counted_as_aws_counts_messages() -> None:
    # The capacity model counts messages (SNS 30,000 msg/s is per message, not per request).
    sns_batch = b"Action=PublishBatch&TopicArn=t" + b"".join(
        f"&PublishBatchRequestEntries.member.{i}.Id=e{i}&PublishBatchRequestEntries.member.{i}.Message=m".encode()
        for i in range(1, 8)
    )
    assert _entries("sns", "PublishBatch", sns_batch, b"", {}) == 7
    assert _entries("sns", "Publish", b"Action=Publish&Message=m", b"", {}) == 1
    send = {"Entries": [{"Id": str(i), "MessageBody": "x"} for i in range(4)]}
    assert _entries("sqs", "SendMessageBatch", _j(send), b"", send) == 4
    assert _entries("sqs", "ReceiveMessage", b"{}", _j({"Messages": [{"Body": "x"}] * 3}), {}) == 3
    assert _entries("sqs", "ReceiveMessage", b"{}", _j({}), {}) == 0
    events = {"Entries": [{"Detail": "{}"}] * 2}
    assert _entries("events", "PutEvents", _j(events), b"", events) == 2
    tx = {"TransactItems": [{"Put": {}}, {"Update": {}}]}
    assert _entries("dynamodb", "TransactWriteItems", _j(tx), b"", tx) == 2
    batch = {"RequestItems": {"a": [{}, {}], "b": [{}]}}
    assert _entries("dynamodb", "BatchWriteItem", _j(batch), b"", batch) == 3
    assert _entries("dynamodb", "PutItem", b"{}", b"", {}) == 1


def test_a_request_without_a_known_key_is_the_drivers_and_a_glue_agent_names_the_glue() -> None:
    assert _caller(None, "") == "other"
    assert _caller("AKIAUNKNOWN", "Boto3/1.0 relay-glue/esm") == "glue:esm (other)"


# -- DynamoDB writes measured on the stored items (WriteMeasure), in-process moto --------------------


@pytest.fixture
def table() -> Any:
    """A table with a KEYS_ONLY global secondary index on ``due`` (a sparse index, as the deadline
    index is), in moto's in-process backend: the one the emulator's meter reads."""
    from moto import mock_aws

    with mock_aws():
        import boto3
        from moto.dynamodb.models import dynamodb_backends

        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "due", "AttributeType": "S"},
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "by-due",
                    "KeySchema": [{"AttributeName": "due", "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                }
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        yield ddb, dynamodb_backends["123456789012"]["us-east-1"]


def _measured(table: Any, action: str, request: dict[str, Any]) -> float:
    """``request`` sent through boto3, billed by a WriteMeasure taken around it."""
    ddb, backend = table
    measure = WriteMeasure(backend, action, request)
    call = {"PutItem": ddb.put_item, "UpdateItem": ddb.update_item, "DeleteItem": ddb.delete_item}
    try:
        if action == "TransactWriteItems":
            ddb.transact_write_items(**request)
        else:
            call[action](**request)
    except ddb.exceptions.ClientError:
        pass
    return measure.billed()


def test_an_update_of_one_attribute_is_billed_by_the_whole_item_it_leaves(table: Any) -> None:
    big = {"pk": {"S": "a"}, "history": {"S": "h" * (3 * KB)}}
    assert _measured(table, "PutItem", {"TableName": "t", "Item": big}) == 4  # 3 KB + names: 4 units
    small_update = {
        "TableName": "t",
        "Key": {"pk": {"S": "a"}},
        "UpdateExpression": "SET v = :v",
        "ExpressionAttributeValues": {":v": {"N": "1"}},
    }
    assert _measured(table, "UpdateItem", small_update) == 4  # not 1: the item is 3 KB
    # In a transaction, twice.
    assert _measured(table, "TransactWriteItems", {"TransactItems": [{"Update": small_update}]}) == 8
    # A failed condition is billed by the item it met.
    failed = {**small_update, "ConditionExpression": "attribute_not_exists(pk)"}
    assert _measured(table, "UpdateItem", failed) == 4
    assert _measured(table, "DeleteItem", {"TableName": "t", "Key": {"pk": {"S": "a"}}}) == 4
    # A put of a new small item, and a delete of an item that is not there: 1 unit each.
    assert _measured(table, "PutItem", {"TableName": "t", "Item": {"pk": {"S": "b"}}}) == 1
    assert _measured(table, "DeleteItem", {"TableName": "t", "Key": {"pk": {"S": "c"}}}) == 1


def test_a_global_secondary_index_bills_its_own_writes(table: Any) -> None:
    def set_due(value: str | None) -> dict[str, Any]:
        if value is None:
            return {"TableName": "t", "Key": {"pk": {"S": "a"}}, "UpdateExpression": "REMOVE due"}
        return {
            "TableName": "t",
            "Key": {"pk": {"S": "a"}},
            "UpdateExpression": "SET due = :d",
            "ExpressionAttributeValues": {":d": {"S": value}},
        }

    assert _measured(table, "PutItem", {"TableName": "t", "Item": {"pk": {"S": "a"}}}) == 1  # not indexed
    assert _measured(table, "UpdateItem", set_due("10:00")) == 1 + 1  # the table + an index entry put
    assert _measured(table, "UpdateItem", set_due("11:00")) == 1 + 2  # index key changed: delete + put
    unprojected = {
        "TableName": "t",
        "Key": {"pk": {"S": "a"}},
        "UpdateExpression": "SET note = :n",
        "ExpressionAttributeValues": {":n": {"S": "x"}},
    }
    assert _measured(table, "UpdateItem", unprojected) == 1  # KEYS_ONLY: the index is not written
    assert _measured(table, "UpdateItem", set_due(None)) == 1 + 1  # the index entry deleted
