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
    INVENTORY_TABLE,
    ORDERS_TABLE,
    PAID_ORDERS,
    SHIPPING,
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


def _old_reservation(world: OrdersWorld, status: str = "RESERVED") -> None:
    """The reservation item the layout before wrote in the inventory table (the step's record then),
    with the stock it took."""
    world.ddb.put_item(
        TableName=INVENTORY_TABLE,
        Item=serialize_item(
            {
                "pk": f"ORDER#{ORDER_ID}",
                "sk": "RESERVATION",
                "kind": "reservation",
                "orderId": ORDER_ID,
                "items": LINES,
                "status": status,
                "reservedAt": "2026-12-01T10:00:01.000Z",
                "reservedBy": _created().event_id,
            }
        ),
    )
    available, reserved = world.stock("SKU-MUG") or (0, 0)
    world.seed({"SKU-MUG": available - 2})
    world.ddb.update_item(
        TableName=INVENTORY_TABLE,
        Key=serialize_item({"pk": "SKU#SKU-MUG", "sk": "STOCK"}),
        UpdateExpression="SET reserved = :r",
        ExpressionAttributeValues={":r": {"N": str(reserved + 2)}},
    )


def test_an_order_reserved_before_the_upgrade_is_released_through_its_reservation_item(
    world: OrdersWorld,
) -> None:
    _old_order(world, status="RESERVED", version=2)
    _old_reservation(world)
    assert world.stock("SKU-MUG") == (STOCK["SKU-MUG"] - 2, 2)

    assert cancel(ORDER_ID)["statusCode"] == 200
    (cancelled,) = world.outbox(ORDER_ID, "OrderCancelled")
    response = deliver(world, INVENTORY, cancelled, times=2)

    assert failed_ids(response) == []
    assert world.stock("SKU-MUG") == (STOCK["SKU-MUG"], 0)  # given back once
    item = world.reservation_item(ORDER_ID)
    assert item is not None and item["status"] == "RELEASED"
    order = world.order(ORDER_ID)
    assert order is not None and "stock" not in order


def test_an_order_paid_and_reserved_before_the_upgrade_takes_no_stock_again_and_ships(
    world: OrdersWorld, shipping: Any
) -> None:
    """Paid before its reservation, then reserved, all before the deploy: the order stayed PAID and only
    the reservation item says the stock is taken. A redelivered OrderCreated takes nothing more, and the
    order ships."""
    _old_order(world, status="PAID", version=2, paymentOperationId="op-old")
    _old_reservation(world)
    taken = world.stock("SKU-MUG")

    response = deliver(world, INVENTORY, _created(), times=2)

    assert failed_ids(response) == []
    assert world.stock("SKU-MUG") == taken
    paid = order_event(
        "OrderPaid",
        order_from_item(world.order(ORDER_ID) or {}),
        "paid",
        payload={"paymentOperationId": "op-old"},
        occurred_at=parse_iso("2026-12-01T10:00:02.000Z"),
    )
    assert failed_ids(deliver(world, SHIPPING, paid)) == []
    order = world.order(ORDER_ID)
    assert order is not None and order["shipment"]["status"] == "REQUESTED"
    assert shipping.shipments_by_order() == {ORDER_ID: 1}
