"""Issue 33 item 4: an order item stays under 1 KB on the common path -- created, reserved, paid and
shipped, with a real payment's operation id -- so each write of it bills one write unit. Measured by
DynamoDB's documented size rule on every version of the item."""

from __future__ import annotations

import uuid
from typing import Any

from boto3.dynamodb.types import TypeSerializer

from local.fakes.shipping_api import ShippingApiFake
from tests.ddb_item_size import KB, item_size, parts
from tests.handlers.orders.api_client import order_request, placed_order
from tests.handlers.orders.world import (
    INVENTORY,
    PAID_ORDERS,
    SHIPPING,
    OrdersWorld,
    deliver,
    failed_ids,
    payment_completed,
)


def _image(world: OrdersWorld, order_id: str) -> dict[str, Any]:
    item = world.order(order_id)
    assert item is not None
    return {k: TypeSerializer().serialize(v) for k, v in item.items()}


def test_every_version_of_an_order_item_is_under_1_kb(world: OrdersWorld, shipping: ShippingApiFake) -> None:
    # Two lines and a customer id 20 characters longer than the bench's: some headroom is the point.
    world.seed({"SKU-COFFEE-MUG-0001": 1000, "SKU-TEAPOT-0002": 1000})
    lines = [{"sku": "SKU-COFFEE-MUG-0001", "quantity": 2}, {"sku": "SKU-TEAPOT-0002", "quantity": 1}]
    order_id = placed_order(order_request(customerId="customer-000000000000000007", items=lines))
    versions = {"CREATED": _image(world, order_id)}
    assert failed_ids(deliver(world, INVENTORY, *world.outbox(order_id, "OrderCreated"))) == []
    versions["RESERVED"] = _image(world, order_id)
    operation_id = str(uuid.uuid4())
    paid = payment_completed(order_id, operation_id, payment_id=f"cost-{uuid.uuid4().hex[:10]}")
    assert failed_ids(deliver(world, PAID_ORDERS, paid)) == []
    versions["PAID"] = _image(world, order_id)
    (order_paid,) = world.outbox(order_id, "OrderPaid")
    assert failed_ids(deliver(world, SHIPPING, order_paid)) == []
    versions["SHIPPED"] = _image(world, order_id)
    assert versions["SHIPPED"]["shipment"]["M"]["status"]["S"] == "REQUESTED"

    too_large = {state: (item_size(i), parts(i)[:6]) for state, i in versions.items() if item_size(i) > KB}
    assert too_large == {}
    # The events left the order's id and correlation id to the item, and came back whole.
    assert order_paid.ids == {"orderId": order_id, "operationId": operation_id}
    assert order_paid.correlation_id == world.order(order_id)["correlationId"]  # type: ignore[index]
    assert "ev" not in versions["SHIPPED"], "the OrderPaid that shipping received leaves the item"


def test_an_order_the_version_before_wrote_whole_is_read_paid_and_shipped(
    world: OrdersWorld, shipping: ShippingApiFake
) -> None:
    """Issue 33 item 6: an order item written before the item left its repeats out -- ``orderId`` as
    an attribute, its history as maps, its event with every id -- is read, paid and shipped once
    ``ops migrate`` rewrote it (``orders.migration``)."""
    from relay.ddb import serialize_item
    from relay.entity_events import compact, events_in
    from relay.state_machine import parse_iso
    from tests.handlers.orders.world import ORDERS_TABLE

    world.seed({"SKU-MUG": 100})
    order_id = placed_order(order_request(items=[{"sku": "SKU-MUG", "quantity": 1}]))
    item = world.order(order_id)
    assert item is not None
    created_at = item["createdAt"]
    events = events_in(item)
    item.update(
        orderId=order_id,
        history=[{"status": "CREATED", "at": created_at}],
        ev=[compact(e) for e in events],
    )
    del item["schemaVersion"]
    world.ddb.put_item(TableName=ORDERS_TABLE, Item=serialize_item(item))
    from orders.migration import migrate_order

    assert migrate_order(world.ddb, orders_table=ORDERS_TABLE, item=item, dry_run=False) == "migrated"

    assert failed_ids(deliver(world, INVENTORY, *events)) == []
    operation_id = str(uuid.uuid4())
    assert failed_ids(deliver(world, PAID_ORDERS, payment_completed(order_id, operation_id))) == []
    (order_paid,) = world.outbox(order_id, "OrderPaid")
    assert order_paid.ids == {"orderId": order_id, "operationId": operation_id}
    assert failed_ids(deliver(world, SHIPPING, order_paid)) == []

    history = world.history(order_id)
    assert [s for s, _ in history] == ["CREATED", "RESERVED", "PAID"]
    assert history[0][1] == created_at and all(parse_iso(at) for _, at in history)
    assert world.order(order_id)["shipment"]["status"] == "REQUESTED"  # type: ignore[index]
