"""``ops migrate`` on an orders stage loaded with every older layout (the items the old-layout tests
write): each order, its outbox rows and its reservation item end in today's layout, and the new handlers
then reserve, release, pay and ship each order exactly once.

The passes run as ``python -m ops migrate`` runs them (``ops.migrate.run_pass``), against the world's
tables; the stream publisher's environment is the template's."""

from __future__ import annotations

from typing import Any

import pytest
from orders.store import order_from_item

from ops.migrate import ORDERS_PUBLISHER
from relay import entity_events
from tests.handlers.migration import WorldApp
from tests.handlers.migration import migrate as run_migration
from tests.handlers.orders.api_client import cancel
from tests.handlers.orders.conftest import STOCK
from tests.handlers.orders.older_layout import ORDER_ID, _created, _old_order, _old_reservation
from tests.handlers.orders.world import (
    INVENTORY,
    INVENTORY_TABLE,
    ORDERS_TABLE,
    PAID_ORDERS,
    PAYMENT_TOPIC,
    SHIPPING,
    OrdersWorld,
    Pump,
    deliver,
    failed_ids,
    payment_completed,
)
from tests.handlers.orders.world import REGION as WORLD_REGION


def world_app() -> WorldApp:
    tables = {("orders", "orders"): ORDERS_TABLE, ("orders", "inventory"): INVENTORY_TABLE}
    return WorldApp("dev", WORLD_REGION, tables=tables)


def migrate(world: OrdersWorld, *, dry_run: bool = False) -> dict[str, dict[str, int]]:
    return run_migration(world_app(), "orders", {ORDERS_PUBLISHER: world.env()}, dry_run=dry_run)


def outbox_rows(world: OrdersWorld) -> list[dict[str, Any]]:
    return [
        i for i in world.ddb.scan(TableName=ORDERS_TABLE)["Items"] if i.get("kind", {}).get("S") == "outbox"
    ]


def assert_todays_layout(world: OrdersWorld) -> None:
    item = world.order(ORDER_ID)
    assert item is not None
    assert item[entity_events.SCHEMA_VERSION_ATTRIBUTE] == entity_events.SCHEMA_VERSION
    assert item[entity_events.SEEN_ATTRIBUTE] == {} or isinstance(item[entity_events.SEEN_ATTRIBUTE], dict)
    assert all(isinstance(h, str) for h in item["history"]), item["history"]
    assert "orderId" not in item
    assert outbox_rows(world) == []
    assert world.reservation_item(ORDER_ID) is None


def test_a_created_order_of_the_layout_before_is_migrated_then_reserved_paid_and_shipped_once(
    world: OrdersWorld, shipping: Any
) -> None:
    _old_order(world)  # its OrderCreated only in an unpublished outbox row

    counts = migrate(world)

    assert counts["orders without schemaVersion"].get("migrated") == 1
    assert counts["orders outbox rows"].get("published and deleted") == 1
    assert_todays_layout(world)
    pump = Pump(world)
    pump.run()  # the published OrderCreated reaches inventory: stock reserved once
    assert world.stock("SKU-MUG") == (STOCK["SKU-MUG"] - 2, 2)
    world.publish(PAYMENT_TOPIC, payment_completed(ORDER_ID, "op-old"))
    pump.run()
    assert world.status(ORDER_ID) == "PAID"
    (paid,) = world.outbox(ORDER_ID, "OrderPaid")
    assert failed_ids(deliver(world, SHIPPING, paid, times=2)) == []
    assert shipping.shipments_by_order() == {ORDER_ID: 1}
    assert world.stock("SKU-MUG") == (STOCK["SKU-MUG"] - 2, 2)
    assert world.parked(INVENTORY) == world.parked(PAID_ORDERS) == []


def test_a_reservation_item_is_folded_into_the_order_and_the_stock_is_given_back_once(
    world: OrdersWorld,
) -> None:
    _old_order(world, status="RESERVED", version=2)
    _old_reservation(world)

    counts = migrate(world)

    assert counts["orders reservation items"].get("migrated") == 1
    assert_todays_layout(world)
    order = world.order(ORDER_ID)
    assert order is not None and order["stock"] == "RESERVED"
    assert cancel(ORDER_ID)["statusCode"] == 200
    Pump(world).run()  # the migrated OrderCreated row, then the OrderCancelled, each delivered twice
    assert world.stock("SKU-MUG") == (STOCK["SKU-MUG"], 0)  # given back once, through the order's stock
    order = world.order(ORDER_ID)
    assert order is not None and order["stock"] == "RELEASED"


def test_an_order_paid_and_reserved_before_takes_no_stock_again_and_ships_once(
    world: OrdersWorld, shipping: Any
) -> None:
    _old_order(world, status="PAID", version=2, paymentOperationId="op-old")
    _old_reservation(world)
    taken = world.stock("SKU-MUG")

    migrate(world)

    assert_todays_layout(world)
    Pump(world).run()  # the migrated OrderCreated row reaches inventory again, twice
    assert failed_ids(deliver(world, INVENTORY, _created(), times=2)) == []
    assert world.stock("SKU-MUG") == taken
    from orders.intake import order_event

    from relay.state_machine import parse_iso

    paid = order_event(
        "OrderPaid",
        order_from_item(world.order(ORDER_ID) or {}),
        "paid",
        payload={"paymentOperationId": "op-old"},
        occurred_at=parse_iso("2026-12-01T10:00:02.000Z"),
    )
    assert failed_ids(deliver(world, SHIPPING, paid, times=2)) == []
    assert shipping.shipments_by_order() == {ORDER_ID: 1}


def test_a_second_migration_finds_nothing_and_a_dry_run_writes_nothing(world: OrdersWorld) -> None:
    _old_order(world, status="RESERVED", version=2)
    _old_reservation(world)
    before = (
        world.ddb.scan(TableName=ORDERS_TABLE)["Items"],
        world.ddb.scan(TableName=INVENTORY_TABLE)["Items"],
    )

    dry = migrate(world, dry_run=True)

    assert dry["orders without schemaVersion"] == {"scanned": 2, "would migrate": 1}
    assert dry["orders reservation items"].get("would migrate") == 1
    assert dry["orders outbox rows"].get("would publish and delete") == 1
    after = (
        world.ddb.scan(TableName=ORDERS_TABLE)["Items"],
        world.ddb.scan(TableName=INVENTORY_TABLE)["Items"],
    )
    assert after == before
    migrate(world)
    again = migrate(world)
    assert all(set(counts) <= {"scanned"} for counts in again.values()), again


def test_a_migration_racing_a_step_leaves_the_steps_write_and_converts_it_on_the_retry(
    world: OrdersWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The order moves on between the scan and the migration's write: the write's condition (the version
    read) fails, the item is read again, and the retry converts the version the step wrote."""
    from orders import migration

    _old_order(world)
    real = migration.migrate_order
    raced: list[int] = []

    def racing(ddb: Any, *, orders_table: str, item: Any, dry_run: bool) -> str:
        if not raced:
            raced.append(int(item["version"]))
            # A step (the release that still read the layout before) writes version 2 meanwhile.
            world.ddb.update_item(
                TableName=ORDERS_TABLE,
                Key={"pk": {"S": f"ORDER#{ORDER_ID}"}, "sk": {"S": "ORDER"}},
                UpdateExpression="SET #s = :s, version = :v",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={":s": {"S": "CANCELLED"}, ":v": {"N": "2"}},
            )
        return real(ddb, orders_table=orders_table, item=item, dry_run=dry_run)

    monkeypatch.setattr(migration, "migrate_order", racing)

    counts = migrate(world)

    assert raced == [1]
    assert counts["orders without schemaVersion"].get("migrated") == 1
    order = world.order(ORDER_ID)
    assert order is not None and order["status"] == "CANCELLED" and order["version"] == 2
    assert order[entity_events.SCHEMA_VERSION_ATTRIBUTE] == entity_events.SCHEMA_VERSION


def test_doctor_counts_the_items_of_an_older_layout_until_the_migration_leaves_none(
    world: OrdersWorld,
) -> None:
    from ops.migrate import older_items

    _old_order(world, status="RESERVED", version=2)
    _old_reservation(world)
    app = world_app()

    before = older_items(app)
    migrate(world)
    after = older_items(app)

    assert before["orders without schemaVersion"] == 1
    assert before["orders reservation items"] == 1
    assert before["orders outbox rows"] == 1
    assert set(after.values()) == {0}, after
