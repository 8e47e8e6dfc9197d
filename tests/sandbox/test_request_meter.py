"""The emulator's request meter bills each request as AWS does (``local.request_meter``): SQS and SNS
per 64 KB chunk, EventBridge per entry chunk, DynamoDB per write unit (1 KB, x2 in a transaction) and
read unit (4 KB; 0.5 eventually consistent, 2 transactional); empty receives and GetRecords apart."""

from __future__ import annotations

import json

import pytest

from local.request_meter import _billed, _caller

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


def test_a_request_without_a_known_key_is_the_drivers_and_a_glue_agent_names_the_glue() -> None:
    assert _caller(None, "") == "other"
    assert _caller("AKIAUNKNOWN", "Boto3/1.0 relay-glue/esm") == "glue:esm (other)"
