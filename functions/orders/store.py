"""Data access for the orders tables -- the ONLY module that knows attribute names and key shapes.

Orders table (``ORDERS_TABLE``; pk/sk, stream NEW_AND_OLD_IMAGES, TTL ``expiresAt``):

* the order:          ``pk = ORDER#<orderId>, sk = ORDER`` (kind ``order``). It is its own
  processed-event marker and outbox (``relay.entity_events``): ``seen`` (the last event a step
  processed -> its payload hash) and ``ev`` (the events the last write produced, which the stream
  publisher publishes from the NEW image), and it records its request's ``requestSha256``;
* an orphan payment:  ``pk = ORDER#<orderId>, sk = PAYMENT#<operationId>`` (kind ``orphan-payment``,
  status ``ORPHANED``, reason) -- a completed payment that could not be applied to its order.

The order item's ``shipment`` (shipmentId, status, at, eventId) is set once, by the shipping consumer,
without a version bump: no transition reads it, and a PAID order whose stock is reserved moves no more.

Everything about one order reads with one Query on its partition.

Inventory table (``INVENTORY_TABLE``; pk/sk):

* stock level:  ``pk = SKU#<sku>, sk = STOCK`` -- ``available`` and ``reserved`` (Numbers)

Every order carries ``schemaVersion`` 2; items of the layout before one write per step (outbox rows,
reservation items, history as maps) are rewritten by ``ops migrate`` (``orders.migration``).

Every step is ONE write of the order (a transition, the stock it holds, or the shipment), or -- where
stock moves -- ONE transaction of the order (the step's record) and one write per SKU: no separate
marker is written. The
idempotency table holds the Powertools records of the notifier and, on a stage upgraded from the
layout before, client Idempotency-Keys bound then (``id = request-key#<key>``, read until their TTL).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orders.orders import (
    Cancellation,
    HistoryEntry,
    Order,
    OrderLine,
    Rejection,
    Shipment,
    Status,
    StockHold,
    TransitionPlan,
)
from relay import entity_events
from relay.ddb import BusinessWrite, OnConditionFailed, deserialize_item, put, serialize_item
from relay.entity_store import EntityStore
from relay.envelope import Envelope
from relay.expressions import Condition, Update

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

from relay.state_machine import (
    iso_moment,
    short_moment,
    state_of,
    transition_write,
)

ORDER_SK = "ORDER"
ORDER_KIND = "order"
ORPHAN_PAYMENT_KIND = "orphan-payment"
ORPHANED = "ORPHANED"
STOCK_SK = "STOCK"


def order_key(order_id: str) -> dict[str, str]:
    return {"pk": f"ORDER#{order_id}", "sk": ORDER_SK}


def orphan_payment_key(order_id: str, operation_id: str) -> dict[str, str]:
    return {"pk": f"ORDER#{order_id}", "sk": f"PAYMENT#{operation_id}"}


def stock_key(sku: str) -> dict[str, str]:
    return {"pk": f"SKU#{sku}", "sk": STOCK_SK}


@dataclass(frozen=True)
class StockLevel:
    sku: str
    available: int
    reserved: int


def _line_items(lines: Sequence[OrderLine]) -> list[dict[str, Any]]:
    return [{"sku": line.sku, "quantity": line.quantity} for line in lines]


def _lines(value: Any) -> tuple[OrderLine, ...]:
    return tuple(OrderLine(str(i["sku"]), int(i["quantity"])) for i in value or [])


# What an order's events need not repeat: the item holds its orderId (in its key) and correlation id
# (``relay.entity_events.compact``).
_HELD_IN_EVENTS = ("orderId", "correlationId")


def _held(order: Order) -> dict[str, str]:
    """What the order's item holds of its events' ids (``entity_events.held_values`` on the attributes
    ``create_order`` writes, which never change): its creation and every transition use it."""
    item = dict(order_key(order.order_id))
    if order.correlation_id != order.order_id:  # equal, it is read back from the key, kept or not
        item["correlationId"] = order.correlation_id
    return entity_events.held_values(item, _HELD_IN_EVENTS)


def _history_to_item(entry: Mapping[str, Any]) -> str:
    # "PAID mi4d5v6g" (the time in base-36 epoch ms): a third of the map it was.
    return f"{entry['status']} {short_moment(str(entry['at']))}"


def history_entry_from_item(value: Any) -> HistoryEntry:
    """A history entry as the item keeps it."""
    status, at = str(value).split(" ")
    return HistoryEntry(status, iso_moment(at))


def order_from_item(item: Mapping[str, Any]) -> Order:
    rejection = item.get("rejection")
    cancellation = item.get("cancellation")
    order_id = str(item["pk"]).removeprefix("ORDER#")
    return Order(
        order_id=order_id,
        customer_id=str(item["customerId"]),
        currency=str(item["currency"]),
        items=_lines(item.get("items")),
        status=Status(str(item["status"])),
        version=int(item["version"]),
        correlation_id=str(item.get("correlationId") or order_id),
        created_at=str(item["createdAt"]),
        updated_at=str(item["updatedAt"]),
        history=tuple(history_entry_from_item(h) for h in item.get("history") or []),
        rejection=Rejection(str(rejection["code"]), str(rejection["reason"]), str(rejection["sku"]))
        if isinstance(rejection, Mapping)
        else None,
        cancellation=Cancellation(
            str(cancellation["code"]), str(cancellation["reason"]), str(cancellation["operationId"])
        )
        if isinstance(cancellation, Mapping)
        else None,
        payment_operation_id=str(item["paymentOperationId"]) if item.get("paymentOperationId") else None,
        shipment=_shipment(item.get("shipment")),
        stock=StockHold(str(item["stock"])) if item.get("stock") else None,
        seen=dict(item.get(entity_events.SEEN_ATTRIBUTE) or {}),
    )


def _shipment(value: Any) -> Shipment | None:
    if not isinstance(value, Mapping):
        return None
    return Shipment(
        status=str(value["status"]),
        at=str(value["at"]),
        event_id=str(value["eventId"]),
        shipment_id=str(value["shipmentId"]) if value.get("shipmentId") else None,
        reason=str(value["reason"]) if value.get("reason") else None,
    )


def status_of(item: Mapping[str, Any] | None) -> tuple[Status | None, int | None]:
    """State and version of an order item as returned with a failed condition (ALL_OLD)."""
    status, version = state_of(item)
    return (Status(status) if status is not None else None), version


def _to_attribute(value: Any) -> Any:
    if isinstance(value, Cancellation):
        return {"code": value.code, "reason": value.reason, "operationId": value.operation_id}
    if isinstance(value, Rejection):
        return {"code": value.code, "reason": value.reason, "sku": value.sku}
    return value


# Domain field -> attribute name, for the fields a transition may set.
_ATTRIBUTES = {
    "stock": "stock",
    "rejection": "rejection",
    "cancellation": "cancellation",
    "payment_operation_id": "paymentOperationId",
}


class OrderStore(EntityStore):
    """Orders (each its own marker and outbox) and orphan payments; the client Idempotency-Keys bound
    before the one-write layout (``request_keys``)."""

    ENTITY = "order"
    ID_ATTRIBUTE = "orderId"
    NEW_ONE = "a new order"
    ID_NAMESPACE = uuid.UUID("5d1f3c2a-8e47-4b6a-a1d9-7c0e4f2b9a63")

    def __init__(
        self, *, orders_table: str, idempotency_table: str | None, ddb_client: DynamoDBClient
    ) -> None:
        super().__init__(table_name=orders_table, idempotency_table=idempotency_table, ddb_client=ddb_client)

    # reads ---------------------------------------------------------------------------------------

    def get_order(self, order_id: str) -> Order | None:
        item = self.read(order_key(order_id))
        return order_from_item(item) if item else None

    # writes --------------------------------------------------------------------------------------

    def create_order(self, order: Order, event: Envelope, *, request_sha256: str) -> None:
        """ONE conditional PutItem: the CREATED order with its ``OrderCreated`` inside it (published from
        the stream) and its request's sha256. Raises ``EntityExists`` with the stored order when the id
        is taken."""
        item = {
            **order_key(order.order_id),
            "kind": ORDER_KIND,
            "customerId": order.customer_id,
            "currency": order.currency,
            "items": _line_items(order.items),
            "status": str(order.status),
            "version": order.version,
            "correlationId": order.correlation_id,
            "createdAt": order.created_at,
            "updatedAt": order.updated_at,
            "history": [_history_to_item(h.entry()) for h in order.history],
            "requestSha256": request_sha256,
            entity_events.SEEN_ATTRIBUTE: {},
            entity_events.SCHEMA_VERSION_ATTRIBUTE: entity_events.SCHEMA_VERSION,
        }
        self.create(item, event, _held(order))

    def transition_write(
        self,
        plan: TransitionPlan,
        *,
        on_condition_failed: OnConditionFailed,
        cause: Envelope | None = None,
        events: Sequence[Envelope] = (),
        order: Order | None = None,
    ) -> BusinessWrite:
        """The conditional update that applies ``plan`` (``relay.state_machine.transition_write``) and
        records in the order the ``cause`` it processed and the ``events`` it produces
        (``relay.entity_events.record``, without what the ``order`` read holds already)."""
        held = _held(order) if order is not None else None
        return transition_write(
            self.table_name,
            order_key(plan.entity_id),
            plan,
            history_attribute="history",
            history_entry=_history_to_item,
            attributes={
                _ATTRIBUTES[name]: _to_attribute(value) for name, value in plan.set_attributes.items()
            },
            on_condition_failed=on_condition_failed,
            record=lambda change: entity_events.record(change, cause, events, held),
        )

    def stock_write(
        self,
        order: Order,
        hold: StockHold,
        cause: Envelope,
        *,
        expect: Status,
        on_condition_failed: OnConditionFailed,
    ) -> BusinessWrite:
        """Record on the order what it holds of the stock (``hold``), and ``cause`` as processed: only
        while the order is ``expect`` and holds what precedes ``hold`` (nothing before RESERVED, RESERVED
        before RELEASED). No version bump: no transition reads it. Stock moves in the same transaction."""
        condition = Condition().exists("pk").equals(status=str(expect))
        if hold is StockHold.RESERVED:
            condition = condition.equals(version=order.version).not_exists("stock")
        else:
            condition = condition.equals(stock=str(StockHold.RESERVED))
        change = Update().set("stock", str(hold))
        entity_events.record_cause(change, condition, cause)
        return change.write(
            self.table_name,
            order_key(order.order_id),
            condition=condition,
            on_condition_failed=on_condition_failed,
        )

    def shipment_write(
        self, order_id: str, shipment: Shipment, cause: Envelope, *, on_condition_failed: OnConditionFailed
    ) -> BusinessWrite:
        """Record the order's shipment once, and ``cause`` as processed: only on a PAID order that has
        none yet. The order's OrderPaid leaves the item: its arrival here (from the bus, which the
        stream publisher reaches after SNS) says it is out, and the item stays under 1 KB."""
        record: dict[str, Any] = {"status": shipment.status, "at": shipment.at, "eventId": shipment.event_id}
        if shipment.shipment_id:
            record["shipmentId"] = shipment.shipment_id
        if shipment.reason:
            record["reason"] = shipment.reason
        change = Update().set("shipment", record).remove(entity_events.EVENTS_ATTRIBUTE)
        condition = Condition().exists("pk").equals(status=str(Status.PAID)).not_exists("shipment")
        entity_events.record_cause(change, condition, cause)
        return change.write(
            self.table_name, order_key(order_id), condition=condition, on_condition_failed=on_condition_failed
        )

    def orphan_payment_write(
        self,
        order_id: str,
        operation_id: str,
        *,
        reason: str,
        order_status: Status | None,
        event_id: str,
        at: str,
        on_condition_failed: OnConditionFailed,
    ) -> BusinessWrite:
        item: dict[str, Any] = {
            **orphan_payment_key(order_id, operation_id),
            "kind": ORPHAN_PAYMENT_KIND,
            "orderId": order_id,
            "operationId": operation_id,
            "status": ORPHANED,
            "reason": reason,
            "eventId": event_id,
            "recordedAt": at,
        }
        if order_status is not None:
            item["orderStatus"] = str(order_status)
        return put(self.table_name, item, "attribute_not_exists(pk)", on_condition_failed=on_condition_failed)


class InventoryStore:
    """Stock levels."""

    def __init__(self, *, inventory_table: str, ddb_client: DynamoDBClient) -> None:
        self.inventory_table = inventory_table
        self.ddb = ddb_client

    def get_stock(self, sku: str) -> StockLevel | None:
        item = self.ddb.get_item(
            TableName=self.inventory_table, Key=serialize_item(stock_key(sku)), ConsistentRead=True
        ).get("Item")
        if not item:
            return None
        plain = deserialize_item(item)
        return StockLevel(sku, int(plain.get("available", 0)), int(plain.get("reserved", 0)))

    def take_write(self, line: OrderLine, *, on_condition_failed: OnConditionFailed) -> BusinessWrite:
        """Move ``quantity`` from available to reserved -- only if that much is available. The
        condition IS the stock check: no read-then-write window in which two orders take the last unit."""
        return (
            Update()
            .add("available", -line.quantity, absent_as=None)
            .add("reserved", line.quantity)
            .write(
                self.inventory_table,
                stock_key(line.sku),
                condition=Condition().exists("available").at_least("available", line.quantity),
                on_condition_failed=on_condition_failed,
            )
        )

    def give_back_write(self, line: OrderLine) -> BusinessWrite:
        """Move ``quantity`` from reserved back to available."""
        return (
            Update()
            .add("available", line.quantity)
            .add("reserved", -line.quantity, absent_as=line.quantity)
            .write(self.inventory_table, stock_key(line.sku))
        )
