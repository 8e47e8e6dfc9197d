"""Orders as the layout before one write per step wrote them (an order item without ``seen``/``ev`` or
``schemaVersion``, its history as maps, its events in outbox rows, its stock in a reservation item of the
inventory table), written by hand for the migration tests (``test_orders_migration.py``)."""

from __future__ import annotations

from typing import Any

from orders.intake import order_event
from orders.store import order_from_item

from relay.ddb import serialize_item
from relay.state_machine import parse_iso
from tests.handlers.orders.world import INVENTORY_TABLE, ORDERS_TABLE, OrdersWorld

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
    row = {
        "pk": f"ORDER#{ORDER_ID}",
        "sk": f"OUTBOX#{created.event_type}#{created.event_id}",
        "kind": "outbox",
        "eventId": created.event_id,
        "eventType": created.event_type,
        "correlationId": created.correlation_id,
        "envelope": created.to_json(),
        "createdAt": "2026-12-01T10:00:00.000Z",
    }
    world.ddb.put_item(TableName=ORDERS_TABLE, Item=serialize_item(row))


def _created() -> Any:
    order = order_from_item(
        {
            "pk": f"ORDER#{ORDER_ID}",
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
