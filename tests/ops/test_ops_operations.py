"""``ops operations [TEXT]`` / ``ops orders [TEXT]`` and what the console lists: found by id (one GetItem) or
correlation id, newest first; ``ops operation ID`` shows the step history decoded; the parked ledger's
entries of one queue, read without a receive (``ops.ledger.entries_of_queue``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from ops import lookup
from ops.app import App
from ops.ledger import entries_of_queue
from relay.ddb import serialize_item
from relay.ledger import ENTITY_INDEX, ledger_key
from relay.state_machine import short_moment

KEYS = [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch) -> Iterator[App]:
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    with mock_aws():
        found = App("dev", "us-east-1")
        ddb = found.client("dynamodb")
        attributes = [{"AttributeName": n, "AttributeType": "S"} for n in ("pk", "sk", "entity", "parkedAt")]
        for table in (found.name("payments", "operations"), found.name("orders", "orders")):
            ddb.create_table(
                TableName=table,
                KeySchema=KEYS,
                AttributeDefinitions=attributes[:2],
                BillingMode="PAY_PER_REQUEST",
            )
        ddb.create_table(
            TableName=found.name("core", "parked-ledger"),
            KeySchema=KEYS,
            AttributeDefinitions=attributes,
            BillingMode="PAY_PER_REQUEST",
            GlobalSecondaryIndexes=[
                {
                    "IndexName": ENTITY_INDEX,
                    "KeySchema": [
                        {"AttributeName": "entity", "KeyType": "HASH"},
                        {"AttributeName": "parkedAt", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
        )
        yield found


def _operation(app: App, operation_id: str, updated: str, *, correlation: str | None = None) -> None:
    item: dict[str, Any] = {
        "pk": f"OPERATION#{operation_id}",
        "sk": "OPERATION",
        "status": "PAYMENT_PROCESSING",
        "version": 2,
        "paymentId": f"pay-{operation_id}",
        "requestSha256": "ab" * 32,
        "request": "{}",
        "createdAt": "2026-12-07T10:00:00.000Z",
        "updatedAt": updated,
        "steps": [
            f"request ACCEPTED {short_moment('2026-12-07T10:00:00.000Z')}",
            f"payment STARTED {short_moment('2026-12-07T10:00:01.000Z')}",
        ],
    }
    if correlation:
        item["correlationId"] = correlation
    app.client("dynamodb").put_item(TableName=app.name("payments", "operations"), Item=serialize_item(item))


def test_an_operation_is_found_by_its_id_or_its_correlation_id_newest_first(app: App) -> None:
    _operation(app, "op-1", "2026-12-07T10:00:05.000Z", correlation="corr-a")
    _operation(app, "op-2", "2026-12-07T10:00:09.000Z", correlation="corr-a")
    _operation(app, "op-3", "2026-12-07T10:00:07.000Z")

    assert [r["id"] for r in lookup.find_operations(app, "op-3")] == ["op-3"]
    assert lookup.find_operations(app, "op-3")[0]["correlationId"] == "op-3"  # none sent: the id
    assert [r["id"] for r in lookup.find_operations(app, "corr-a")] == ["op-2", "op-1"]
    assert [r["id"] for r in lookup.find_operations(app)] == ["op-2", "op-3", "op-1"]
    assert [r["id"] for r in lookup.find_operations(app, "", limit=1)] == ["op-2"]
    assert lookup.find_operations(app, "nobody") == []
    assert lookup.find_orders(app, "op-1") == []  # an operation is not an order


def test_ops_operations_prints_the_matches_and_exits_1_on_none(
    app: App, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ops import __main__ as cli

    _operation(app, "op-1", "2026-12-07T10:00:05.000Z", correlation="corr-a")
    monkeypatch.setattr("ops.app.connect", lambda args: app)
    monkeypatch.setattr(cli, "connect", lambda args: app)
    assert cli.main(["operations", "corr-a"]) == 0
    assert "op-1" in capsys.readouterr().out
    assert cli.main(["operations", "corr-nobody"]) == 1


def test_the_step_history_is_shown_decoded(app: App) -> None:
    _operation(app, "op-1", "2026-12-07T10:00:05.000Z", correlation="corr-a")
    view = lookup.describe_operation(app, "op-1")
    assert view is not None
    assert view["correlationId"] == "corr-a"
    assert view["steps"] == [
        {"step": "request", "status": "ACCEPTED", "at": "2026-12-07T10:00:00.000Z"},
        {"step": "payment", "status": "STARTED", "at": "2026-12-07T10:00:01.000Z"},
    ]


def test_a_queues_ledger_entries_are_read_newest_first_parked_and_redriven_alike(app: App) -> None:
    ddb = app.client("dynamodb")
    source = "https://sqs.us-east-1.amazonaws.com/123456789012/relay-dev-payments-payment-requests"
    for message_id, status, at in (
        ("m-1", "REDRIVEN", "2026-12-07T10:00:00Z"),
        ("m-2", "PARKED", "2026-12-07T11:00:00Z"),
    ):
        ddb.put_item(
            TableName=app.name("core", "parked-ledger"),
            Item=serialize_item(
                {
                    **ledger_key(source, message_id),
                    "status": status,
                    "parkedAt": at,
                    "errorClass": "InvalidInput",
                }
            ),
        )
    entries = entries_of_queue(app, "relay-dev-payments-payment-requests")
    assert [(e["sk"], e["status"]) for e in entries] == [("m-2", "PARKED"), ("m-1", "REDRIVEN")]
    assert entries_of_queue(app, "relay-dev-payments-post-processing") == []
