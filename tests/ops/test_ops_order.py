"""``ops order ID``: what the order item holds, read through the orders store -- the stock it holds
and its shipment included -- with its orphan payments and parked messages; an unknown id exits 1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from ops import lookup
from ops.app import App
from relay.ddb import serialize_item
from relay.ledger import ENTITY_INDEX
from relay.state_machine import short_moment

ORDER = "ord-7"
T0, T1, T2 = "2026-12-07T10:00:00.000Z", "2026-12-07T10:00:01.000Z", "2026-12-07T10:00:02.000Z"
KEYS = [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch) -> Iterator[App]:
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    with mock_aws():
        found = App("dev", "us-east-1")
        ddb = found.client("dynamodb")
        attributes = [{"AttributeName": n, "AttributeType": "S"} for n in ("pk", "sk", "entity", "parkedAt")]
        ddb.create_table(
            TableName=found.name("orders", "orders"),
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


def _put(app: App, item: dict[str, Any]) -> None:
    app.client("dynamodb").put_item(TableName=app.name("orders", "orders"), Item=serialize_item(item))


def _shipped_order(app: App) -> None:
    """A paid order holding its stock, shipped: the item as the orders store writes it."""
    _put(
        app,
        {
            "pk": f"ORDER#{ORDER}",
            "sk": "ORDER",
            "kind": "order",
            "schemaVersion": 2,
            "customerId": "cust-1",
            "currency": "EUR",
            "items": [{"sku": "SKU-1", "quantity": 2}],
            "status": "PAID",
            "version": 3,
            "createdAt": T0,
            "updatedAt": T2,
            "history": [
                f"CREATED {short_moment(T0)}",
                f"RESERVED {short_moment(T1)}",
                f"PAID {short_moment(T2)}",
            ],
            "stock": "RESERVED",
            "paymentOperationId": "op-9",
            "shipment": {"status": "REQUESTED", "at": T2, "eventId": "evt-paid", "shipmentId": "shp-1"},
            "seen": {"evt-paid": "ab12"},
        },
    )


def test_an_order_shows_its_stock_shipment_and_history_as_the_store_reads_them(app: App) -> None:
    _shipped_order(app)
    view = lookup.describe_order(app, ORDER)
    assert view is not None
    assert view["status"] == "PAID" and view["version"] == 3
    assert view["stock"] == "RESERVED"
    assert view["shipment"] == {"status": "REQUESTED", "at": T2, "eventId": "evt-paid", "shipmentId": "shp-1"}
    assert view["items"] == [{"sku": "SKU-1", "quantity": 2}]
    assert [h["status"] for h in view["history"]] == ["CREATED", "RESERVED", "PAID"]
    assert view["history"][1]["at"] == T1
    assert view["paymentOperationId"] == "op-9"
    assert view["seen"] == {"evt-paid": "ab12"}
    assert view["rejection"] is None and view["cancellation"] is None
    # The layout before one write per step is migrated (ops migrate): no reservation item, no outbox rows.
    assert "reservation" not in view and "outbox" not in view


def test_an_orphan_payment_under_the_order_is_listed(app: App) -> None:
    _shipped_order(app)
    _put(app, {"pk": f"ORDER#{ORDER}", "sk": "PAYMENT#op-8", "kind": "orphan-payment", "status": "ORPHANED"})
    view = lookup.describe_order(app, ORDER)
    assert view is not None
    assert [p["sk"] for p in view["orphanPayments"]] == ["PAYMENT#op-8"]


def test_the_command_prints_the_order_and_an_unknown_id_exits_1(
    app: App, capsys: pytest.CaptureFixture[str]
) -> None:
    _shipped_order(app)
    assert lookup._print(lookup.describe_order(app, ORDER), "order", ORDER, False) == 0
    printed = capsys.readouterr().out
    assert "stock: RESERVED\n" in printed
    assert '  {"status": "REQUESTED", "at": "2026-12-07T10:00:02.000Z", "eventId": "evt-paid"' in printed
    assert lookup._print(lookup.describe_order(app, ORDER), "order", ORDER, True) == 0
    assert json.loads(capsys.readouterr().out)["shipment"]["shipmentId"] == "shp-1"
    assert lookup._print(lookup.describe_order(app, "ord-missing"), "order", "ord-missing", False) == 1
    assert "no order ord-missing" in capsys.readouterr().err
