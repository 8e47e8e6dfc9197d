"""Orders end to end through the local sandbox: the fan-out, stock, notifications and paid orders.

The main test runs with the sandbox's duplicate-delivery chaos on every orders function: each stream
batch is published twice (so SNS hands each queue two copies) and each SQS batch is invoked twice, so
every consumer sees every message at least four times. Stock, notifications and analytics must still
move exactly once.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from local.demo_orders import OrdersReader
from local.sandbox import Sandbox
from ops.seed_stock import seed_stock
from tests.e2e import api

pytestmark = pytest.mark.e2e

ORDER_STACK = "-orders-"  # every orders function's name contains it (<stack>-<logicalId>)


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.time() + timeout
    value = None
    while time.time() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"{what}: not reached within {timeout} s (last: {value!r})")


def get_order(sb: Sandbox, order_id: str) -> dict[str, Any]:
    response = api.get(sb, f"/orders/{order_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def order_in(sb: Sandbox, order_id: str, status: str) -> Callable[[], dict[str, Any] | None]:
    def probe() -> dict[str, Any] | None:
        order = get_order(sb, order_id)
        return order if order["status"] == status else None

    return probe


def place(sb: Sandbox, customer: str, items: list[dict[str, Any]]) -> str:
    body = {"customerId": customer, "items": items, "currency": "EUR"}
    response = api.post(sb, "/orders", json=body, headers={"Idempotency-Key": uuid.uuid4().hex})
    assert response.status_code == 201, response.text
    return str(response.json()["orderId"])


def pay(sb: Sandbox, order_id: str) -> str:
    body = {
        "paymentId": f"pay-{uuid.uuid4().hex[:10]}",
        "orderId": order_id,
        "amount": "19.90",
        "currency": "EUR",
        "payer": "customer",
        "payee": "relay-shop",
        "details": {},
    }
    response = api.post(sb, "/payments", json=body, headers={"Idempotency-Key": uuid.uuid4().hex})
    assert response.status_code == 202, response.text
    return str(response.json()["operationId"])


@pytest.fixture(scope="module")
def read(sandbox: Sandbox) -> OrdersReader:
    return OrdersReader(sandbox)


def queues_idle(read: OrdersReader) -> bool:
    return read.queued(dlqs=False) == 0 and read.sb.in_flight() == 0


def duplicated(sb: Sandbox) -> int:
    return sum(m.stats.duplicated_records for m in sb.mappings.items) if sb.mappings else 0


def test_orders_flow_end_to_end_exactly_once_with_every_message_delivered_twice(
    sandbox: Sandbox, read: OrdersReader
) -> None:
    run = uuid.uuid4().hex[:6]
    mug, tea, print_ = f"E2E-MUG-{run}", f"E2E-TEA-{run}", f"E2E-PRINT-{run}"
    seed_stock({mug: 10, tea: 5, print_: 1}, table=read.inventory_table, ddb_client=read.ddb)
    duplicated_before = duplicated(sandbox)

    with sandbox.delivering_twice(ORDER_STACK):
        paid = place(sandbox, f"alice-{run}", [{"sku": mug, "quantity": 2}, {"sku": tea, "quantity": 1}])
        cancelled = place(sandbox, f"bob-{run}", [{"sku": mug, "quantity": 3}])
        rejected = place(sandbox, f"carol-{run}", [{"sku": print_, "quantity": 2}])  # only 1 in stock

        wait_for("order reserved", order_in(sandbox, paid, "RESERVED"))
        wait_for("order reserved", order_in(sandbox, cancelled, "RESERVED"))
        refused = wait_for("order rejected for stock", order_in(sandbox, rejected, "REJECTED"))
        assert print_ in refused["rejection"]["reason"]

        response = api.post(sandbox, f"/orders/{cancelled}/cancel")
        assert response.status_code == 200, response.text
        wait_for("stock released", lambda: read.reservation_status(cancelled) == "RELEASED")

        operation = pay(sandbox, paid)
        orphan_operation = pay(sandbox, cancelled)  # paid after it was cancelled: recorded, not applied
        order = wait_for("order paid", order_in(sandbox, paid, "PAID"), timeout=90)
        assert order["paymentOperationId"] == operation
        orphans = wait_for("orphan payment recorded", lambda: read.rows(cancelled, "PAYMENT#"), 90)
        assert [o["operationId"]["S"] for o in orphans] == [orphan_operation]
        wait_for("orders queues drained", lambda: queues_idle(read), timeout=60)
        time.sleep(2)  # one more batching window for late duplicates
        wait_for("orders queues drained", lambda: queues_idle(read), timeout=60)

    assert duplicated(sandbox) > duplicated_before, "the duplicate-delivery chaos did not run"

    # Stock moved once per order: what the paid order holds; the cancelled one gave back; the
    # rejected one took nothing.
    assert read.stock(mug) == (8, 2)
    assert read.stock(tea) == (4, 1)
    assert read.stock(print_) == (1, 0)
    assert get_order(sandbox, cancelled)["status"] == "CANCELLED"

    # One event per fact, each notified (where the customer hears of it) and archived exactly once.
    order_ids = [paid, cancelled, rejected]
    events = read.events(order_ids)
    assert sorted(events.values()) == sorted(
        ["OrderCreated"] * 3 + ["OrderCancelled", "OrderRejected", "OrderPaid"]
    )
    notified = {k: n for k, n in sandbox.webhook.deliveries_by_key().items() if k in events}
    expected = {e: 1 for e, t in events.items() if t in ("OrderCreated", "OrderPaid", "OrderRejected")}
    assert notified == expected
    archived = [e for e in read.archived_event_ids() if e in events]
    assert sorted(archived) == sorted(events)

    # Nothing parked in the orders DLQs.
    assert read.queued(dlqs=True) == 0


def test_cancel_is_refused_with_409_once_the_order_is_rejected(sandbox: Sandbox, read: OrdersReader) -> None:
    run = uuid.uuid4().hex[:6]
    sku = f"E2E-GONE-{run}"
    seed_stock({sku: 0}, table=read.inventory_table, ddb_client=read.ddb)
    order_id = place(sandbox, f"dave-{run}", [{"sku": sku, "quantity": 1}])
    wait_for("order rejected", order_in(sandbox, order_id, "REJECTED"))
    response = api.post(sandbox, f"/orders/{order_id}/cancel")
    assert response.status_code == 409
    assert "REJECTED" in response.json()["message"]


def test_invalid_order_is_rejected_with_field_errors_and_nothing_stored(
    sandbox: Sandbox, read: OrdersReader
) -> None:
    customer = f"erin-{uuid.uuid4().hex[:6]}"
    body = {"customerId": customer, "items": [{"sku": "SKU-RED-MUG", "quantity": 0}], "currency": "EURO"}
    response = api.post(sandbox, "/orders", json=body)
    assert response.status_code == 400
    fields = {f["field"] for f in response.json()["fields"]}
    assert any("quantity" in f for f in fields) and any("currency" in f for f in fields)
    scanned = read.ddb.scan(
        TableName=read.orders_table,
        FilterExpression="customerId = :c",
        ExpressionAttributeValues={":c": {"S": customer}},
    )
    assert scanned["Count"] == 0
    assert api.get(sandbox, f"/orders/{uuid.uuid4()}").status_code == 404
