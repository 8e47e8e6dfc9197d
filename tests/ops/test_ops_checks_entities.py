"""ops.checks for the consumers that write one item per step (orders' inventory, paid orders, failed
payments and shipping; loyalty's points): the effect of a redriven event is looked for on the entity
item itself -- it records the event (``seen``), else the step's effect is in place -- and never in an
idempotency table those consumers no longer have."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from ops.app import DECLARED, App, FunctionInfo
from ops.checks import EVIDENCE, Subject
from relay.ddb import serialize_item
from relay.envelope import Envelope, new_envelope

REGION = "us-east-1"
ORDERS, INVENTORY, POINTS, VERIFICATIONS = "t-orders", "t-inventory", "t-points", "t-verifications"
ORDER = "ord-1"


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch) -> Iterator[App]:
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    with mock_aws():
        found = App("dev", REGION)
        ddb = found.client("dynamodb")
        for table in (ORDERS, INVENTORY, POINTS, VERIFICATIONS):
            ddb.create_table(
                TableName=table,
                KeySchema=[
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                AttributeDefinitions=[
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ],
                BillingMode="PAY_PER_REQUEST",
            )
        yield found


def _check(app: App, handler: str, event: Envelope) -> str | None:
    # Their environments, as the stacks declare them: no IDEMPOTENCY_TABLE.
    environment = {
        "ORDERS_TABLE": ORDERS,
        "INVENTORY_TABLE": INVENTORY,
        "POINTS_TABLE": POINTS,
        "VERIFICATIONS_TABLE": VERIFICATIONS,
    }
    function = FunctionInfo(
        "fn", "arn", handler.split(".")[0], 30, handler, 256, DECLARED, environment=environment
    )
    check = EVIDENCE[handler].check
    assert check is not None
    return check(Subject(app, function, event))


def _put(app: App, table: str, item: dict[str, Any]) -> None:
    app.client("dynamodb").put_item(TableName=table, Item=serialize_item(item))


def _order(app: App, status: str, **extra: Any) -> None:
    _put(app, ORDERS, {"pk": f"ORDER#{ORDER}", "sk": "ORDER", "status": status, "version": 2, **extra})


def _event(event_type: str, **ids: str) -> Envelope:
    return new_envelope(
        event_type,
        identity=[ORDER, event_type, *ids.values()],
        ids={"orderId": ORDER, **ids},
        payload={"customerId": "cust-1", "paymentOperationId": "op-1"},
        correlation_id="c-1",
    )


INVENTORY_HANDLER = "orders.handlers.inventory.handler"


def test_a_reservation_is_found_on_the_order_by_its_seen_or_its_stock(app: App) -> None:
    created = _event("OrderCreated")
    _order(app, "CREATED")
    assert "does not record it and its effect is not in place" in (
        _check(app, INVENTORY_HANDLER, created) or ""
    )
    _order(app, "RESERVED", stock="RESERVED", seen={created.event_id: "h"})
    assert _check(app, INVENTORY_HANDLER, created) is None
    _order(app, "PAID", stock="RESERVED")  # a later step replaced seen: the stock is still held
    assert _check(app, INVENTORY_HANDLER, created) is None


def test_a_release_needs_the_stock_given_back(app: App) -> None:
    cancelled = _event("OrderCancelled")
    _order(app, "CANCELLED", stock="RESERVED")
    assert _check(app, INVENTORY_HANDLER, cancelled) is not None
    _order(app, "CANCELLED", stock="RELEASED")
    assert _check(app, INVENTORY_HANDLER, cancelled) is None


def test_a_payment_is_found_on_the_order_it_paid_or_as_an_orphan(app: App) -> None:
    handler = "orders.handlers.paid_orders.handler"
    completed = _event("PaymentCompleted", operationId="op-1")
    _order(app, "RESERVED")
    assert _check(app, handler, completed) is not None
    _order(app, "PAID", paymentOperationId="op-2")  # paid by another payment
    assert _check(app, handler, completed) is not None
    _put(app, ORDERS, {"pk": f"ORDER#{ORDER}", "sk": "PAYMENT#op-1", "status": "ORPHANED"})
    assert _check(app, handler, completed) is None


def test_a_missing_order_is_named(app: App) -> None:
    problem = _check(
        app, "orders.handlers.failed_payments.handler", _event("PaymentFailed", operationId="op-1")
    )
    assert problem is not None and "does not exist" in problem


def test_shipping_and_points_look_at_their_own_items(app: App) -> None:
    paid = _event("OrderPaid")
    _order(app, "PAID")
    assert _check(app, "orders.handlers.shipping.handler", paid) is not None
    _order(app, "PAID", shipment={"status": "REQUESTED"})
    assert _check(app, "orders.handlers.shipping.handler", paid) is None

    points = "loyalty.handlers.points.handler"
    assert "does not exist" in (_check(app, points, paid) or "")
    _put(app, POINTS, {"pk": "CUSTOMER#cust-1", "sk": f"ORDER#{ORDER}", "accrued": 10, "accruedAt": "t"})
    assert _check(app, points, paid) is None
    assert _check(app, points, _event("OrderRejected")) is not None  # paid, then rejected: not reversed


def test_a_report_event_is_found_by_its_verification_record(app: App) -> None:
    handler = "reports.handlers.verifier.handler"
    event = new_envelope(
        "ReportGenerated", identity=["r-1"], ids={}, payload={"reportId": "r-1"}, correlation_id="c-1"
    )
    assert "does not exist" in (_check(app, handler, event) or "")
    _put(app, VERIFICATIONS, {"pk": "REPORT#r-1", "sk": "VERIFICATION", "status": "MISMATCH"})
    assert _check(app, handler, event) is None  # any recorded status is the report's final outcome


@pytest.mark.parametrize(
    ("handler", "variables"),
    [
        (INVENTORY_HANDLER, {"ORDERS_TABLE", "INVENTORY_TABLE"}),
        ("orders.handlers.paid_orders.handler", {"ORDERS_TABLE"}),
        ("orders.handlers.failed_payments.handler", {"ORDERS_TABLE"}),
        ("orders.handlers.shipping.handler", {"ORDERS_TABLE"}),
        ("loyalty.handlers.points.handler", {"POINTS_TABLE"}),
        ("reports.handlers.verifier.handler", {"VERIFICATIONS_TABLE"}),
    ],
)
def test_each_check_reads_tables_its_consumer_is_configured_with(handler: str, variables: set[str]) -> None:
    from pathlib import Path

    from ops.app import read_declared
    from tests.handlers.stack_world import assembly

    (function,) = [f for f in read_declared(Path(assembly()), "relay-dev").functions if f.handler == handler]
    assert variables <= set(function.environment)
