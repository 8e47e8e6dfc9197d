"""Orders written by the layout before one write per step (an order item without ``seen``/``ev``, its
events in outbox rows, markers in the idempotency table) are still read and completed after the
deploy, and a redelivery of an event processed before it changes nothing."""

from __future__ import annotations

from typing import Any

from orders.intake import order_event
from orders.store import order_from_item

from relay.idempotency import serialize_item
from relay.outbox import outbox_write
from relay.state_machine import parse_iso
from tests.handlers.orders.api_client import cancel, get_order
from tests.handlers.orders.conftest import STOCK
from tests.handlers.orders.world import (
    IDEMPOTENCY_TABLE,
    INVENTORY,
    ORDERS_TABLE,
    PAID_ORDERS,
    OrdersWorld,
    deliver,
    failed_ids,
    payment_completed,
)

ORDER_ID = "11111111-2222-4333-8444-555555555555"
LINES = [{"sku": "SKU-MUG", "quantity": 2}]


def _old_order(world: OrdersWorld, status: str = "CREATED", version: int = 1, **extra: Any) -> None:
    """The order item and its OrderCreated outbox row, as ``OrderStore.create_order`` wrote them before."""
    item = {
        "pk": f"ORDER#{ORDER_ID}",
        "sk": "ORDER",
        "kind": "order",
        "orderId": ORDER_ID,
        "customerId": "cust-old",
        "currency": "EUR",
        "items": LINES,
        "status": status,
        "version": version,
        "correlationId": ORDER_ID,
        "createdAt": "2026-12-01T10:00:00.000Z",
        "updatedAt": "2026-12-01T10:00:00.000Z",
        "history": [{"status": "CREATED", "at": "2026-12-01T10:00:00.000Z"}],
        **extra,
    }
    world.ddb.put_item(TableName=ORDERS_TABLE, Item=serialize_item(item))
    created = _created()
    row = outbox_write(
        created,
        table_name=ORDERS_TABLE,
        key={"pk": f"ORDER#{ORDER_ID}", "sk": f"OUTBOX#{created.event_type}#{created.event_id}"},
    )
    world.ddb.put_item(TableName=ORDERS_TABLE, Item=row.body["Item"])


def _created() -> Any:
    order = order_from_item(
        {
            "orderId": ORDER_ID,
            "customerId": "cust-old",
            "currency": "EUR",
            "items": LINES,
            "status": "CREATED",
            "version": 1,
            "createdAt": "2026-12-01T10:00:00.000Z",
            "updatedAt": "2026-12-01T10:00:00.000Z",
        }
    )
    return order_event(
        "OrderCreated",
        order,
        "created",
        payload={"currency": "EUR", "items": LINES},
        occurred_at=parse_iso("2026-12-01T10:00:00.000Z"),
    )


def test_an_old_layout_order_is_reserved_paid_and_its_order_paid_produced(world: OrdersWorld) -> None:
    _old_order(world)

    deliver(world, INVENTORY, _created())
    response = deliver(world, PAID_ORDERS, payment_completed(ORDER_ID, "op-old"))

    assert failed_ids(response) == []
    assert world.stock("SKU-MUG") == (STOCK["SKU-MUG"] - 2, 2)
    order = world.order(ORDER_ID)
    assert order is not None and order["status"] == "PAID" and order["version"] == 3
    (paid,) = world.outbox(ORDER_ID, "OrderPaid")
    assert paid.ids == {"orderId": ORDER_ID, "operationId": "op-old"}
    assert world.parked(INVENTORY) == world.parked(PAID_ORDERS) == []


def test_an_event_processed_before_the_upgrade_changes_nothing_when_redelivered(world: OrdersWorld) -> None:
    """Before: the reservation committed with a marker; now the reservation itself says it is done."""
    _old_order(world)
    deliver(world, INVENTORY, _created())  # the reservation, as it was made before the deploy
    stock = world.stock("SKU-MUG")
    world.ddb.put_item(  # and its marker
        TableName=IDEMPOTENCY_TABLE, Item=serialize_item({"id": f"event#{_created().event_id}"})
    )

    response = deliver(world, INVENTORY, _created(), times=2)

    assert failed_ids(response) == []
    assert world.stock("SKU-MUG") == stock
    assert world.status(ORDER_ID) == "RESERVED"


def test_an_old_layout_order_can_be_cancelled_and_read(world: OrdersWorld) -> None:
    _old_order(world)

    response = cancel(ORDER_ID)

    assert response["statusCode"] == 200
    (cancelled,) = world.outbox(ORDER_ID, "OrderCancelled")
    assert cancelled.payload is not None and cancelled.payload["previousStatus"] == "CREATED"
    assert get_order(ORDER_ID)["statusCode"] == 200
