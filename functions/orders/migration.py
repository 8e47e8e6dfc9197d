"""Orders items of the layout before one write per step, rewritten into today's (``ops migrate``).

Each function takes one item as a scan returns it (plain values), decides whether it is of an older
layout, and rewrites it with ONE conditional write (or one transaction, where two items move
together), so a migration beside live traffic never overwrites a step's write: a step that wrote in
between fails the condition, and the item is read again on the next pass.

* an order without ``schemaVersion``: today's ``seen`` map (empty: a redelivered event of the layout
  before fails the step's own status or stock condition, and is acknowledged without effect),
  history entries as strings, no ``orderId`` attribute (the key holds it);
* a reservation item in the inventory table: folded into the order's own ``stock`` (RESERVED or
  RELEASED) and deleted, in one transaction conditioned on both.

Outbox rows are the driver's (``ops.migrate``): they are published like the stream publisher does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from orders.store import _history_to_item, order_key
from relay import entity_events
from relay.ddb import apply_write, apply_writes, delete
from relay.expressions import Condition, Update

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# The reservation item of the layout before, in the inventory table (``pk = ORDER#<orderId>``).
RESERVATION_SK = "RESERVATION"
MIGRATED = "migrated"
WOULD = "would migrate"
MOVED_ON = "moved on"  # a step wrote meanwhile: read again on the next pass


class _MovedOn(Exception):
    """The item changed since it was read."""


def _moved_on(*_: Any) -> Exception:
    return _MovedOn()


def migrate_order(ddb: DynamoDBClient, *, orders_table: str, item: Mapping[str, Any], dry_run: bool) -> str:
    """Today's layout for one order item (see the module docstring), only while it is the version read."""
    if dry_run:
        return WOULD
    change = Update().set(entity_events.SCHEMA_VERSION_ATTRIBUTE, entity_events.SCHEMA_VERSION)
    change.set_if_absent(entity_events.SEEN_ATTRIBUTE, {})
    history = item.get("history") or []
    if any(isinstance(entry, Mapping) for entry in history):
        change.set("history", [_history_to_item(h) if isinstance(h, Mapping) else h for h in history])
    if "orderId" in item:
        change.remove("orderId")
    condition = (
        Condition().equals(version=int(item["version"])).not_exists(entity_events.SCHEMA_VERSION_ATTRIBUTE)
    )
    write = change.write(
        orders_table, order_key(_order_id(item)), condition=condition, on_condition_failed=_moved_on
    )
    try:
        apply_write(write, ddb_client=ddb)
    except _MovedOn:
        return MOVED_ON
    return MIGRATED


def is_reservation(item: Mapping[str, Any]) -> bool:
    return item.get("sk") == RESERVATION_SK


def migrate_reservation(
    ddb: DynamoDBClient, *, orders_table: str, inventory_table: str, item: Mapping[str, Any], dry_run: bool
) -> str:
    """The order records what its reservation item says it holds (``stock``), and the reservation
    item goes, in one transaction: only while the order holds nothing yet (or already says the same)
    and the reservation is still what was read."""
    if dry_run:
        return WOULD
    order_id = str(item["pk"]).removeprefix("ORDER#")
    hold = str(item["status"])
    order = (
        Update()
        .set("stock", hold)
        .write(
            orders_table,
            order_key(order_id),
            condition=Condition().exists("pk").not_exists("stock"),
            on_condition_failed=_moved_on,
        )
    )
    gone = delete(
        inventory_table,
        {"pk": item["pk"], "sk": RESERVATION_SK},
        condition="#s = :s",
        names={"#s": "status"},
        values={":s": hold},
        on_condition_failed=_moved_on,
    )
    try:
        apply_writes([order, gone], ddb_client=ddb)
    except _MovedOn:
        return MOVED_ON
    return MIGRATED


def _order_id(item: Mapping[str, Any]) -> str:
    return str(item["pk"]).removeprefix("ORDER#")
