"""The consumers' domain: stock reservation and release (inventory) and paid orders.

Every step follows the kernel's rules (one write per step, ``relay.entity_events``):

* a delivery the order records as processed (``seen``), or whose effect is already in place
  (the stock it holds, order already PAID by this payment), is acknowledged without effect; the same
  eventId with another payload is a ``PayloadConflict``;
* a step that changes the order alone is ONE conditional UpdateItem, conditional on the state and
  version that were read, recording the event it processed and the event it produces in the order;
  moving stock is ONE transaction: the order (the step's record: its ``stock`` says what it holds, and
  its ``seen`` the event) and one write per SKU -- a writer that lost a race re-reads (transient retry)
  and decides again;
* business outcomes (not enough stock, a payment for an order that cannot take it) are committed and
  acknowledged, never retried forever nor parked as poison.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from orders.intake import items_payload, order_event
from orders.orders import (
    CANCELLABLE,
    PAYABLE,
    RESERVABLE,
    AlreadyApplied,
    Cancellation,
    IllegalTransition,
    Order,
    OrderLine,
    Rejection,
    Status,
    StockHold,
    TransitionPlan,
    UnknownOrder,
    merge_lines,
    now_iso,
    plan_transition,
)
from orders.store import InventoryStore, OrderStore, status_of
from orders.subscriptions import (
    ORDER_CANCELLED,
    ORDER_CREATED,
    ORDER_PAID,
    ORDER_REJECTED,
    PAYMENT_CANCELLED,
    PAYMENT_COMPLETED,
    PAYMENT_FAILED,
)
from relay import steps
from relay.ddb import BusinessWrite
from relay.envelope import Envelope
from relay.errors import ConcurrentWrite, InvalidInput
from relay.observability import logger, record_metric
from relay.steps import StepRule

INSUFFICIENT_STOCK = "InsufficientStock"
UNKNOWN_SKU = "UnknownSku"


@dataclass
class StockShortage(Exception):
    """A SKU's conditional decrement failed: not an error, the order's outcome (REJECTED)."""

    sku: str
    requested: int
    available: int | None  # None: the SKU has no stock item at all

    @property
    def code(self) -> str:
        return UNKNOWN_SKU if self.available is None else INSUFFICIENT_STOCK

    @property
    def reason(self) -> str:
        if self.available is None:
            return f"SKU {self.sku} is not stocked ({self.requested} requested)"
        return (
            f"insufficient stock for SKU {self.sku}: {self.requested} requested, {self.available} available"
        )


# The steps, as data. The API, inventory, paid-orders and failed-payments consumers all move an order,
# so a stale write means it changed since it was read: it retries (``relay.steps.Stale``), and the retry
# reads it again and decides from what it finds.
RESERVE_STOCK = StepRule("inventory", (ORDER_CREATED,), "orderId", done=frozenset({Status.RESERVED}))
RELEASE_STOCK = StepRule("inventory", (ORDER_CANCELLED,), "orderId")
MARK_PAID = StepRule("paid-orders", (PAYMENT_COMPLETED,), "operationId")
CANCEL_UNPAID = StepRule(
    "failed-payments", (PAYMENT_FAILED, PAYMENT_CANCELLED), "operationId", done=frozenset({Status.CANCELLED})
)


def _unchanged(order: Order) -> Callable[[dict[str, Any] | None], Exception]:
    def explain(old: dict[str, Any] | None) -> Exception:
        status, version = status_of(old)
        return ConcurrentWrite(
            f"order {order.order_id} changed concurrently (now {status or 'gone'} v{version}; read "
            f"{order.status} v{order.version}); retrying with a fresh read."
        )

    return explain


# -------------------------------------------------------------------------------------------------
# inventory
# -------------------------------------------------------------------------------------------------


def lines_of(envelope: Envelope) -> tuple[OrderLine, ...]:
    """The order lines an OrderCreated carries, one per SKU."""
    items = (envelope.payload or {}).get("items")
    if not isinstance(items, list) or not items:
        raise InvalidInput(f"event {envelope.event_id} ({envelope.event_type}) has no payload.items")
    lines = []
    for index, item in enumerate(items):
        sku = item.get("sku") if isinstance(item, dict) else None
        quantity = item.get("quantity") if isinstance(item, dict) else None
        if not isinstance(sku, str) or not sku or type(quantity) is not int or quantity < 1:
            raise InvalidInput(
                f"event {envelope.event_id}: payload.items[{index}] needs a sku and a positive integer "
                "quantity"
            )
        lines.append(OrderLine(sku, quantity))
    return merge_lines(lines)


def reserve_stock(
    envelope: Envelope, orders: OrderStore, inventory: InventoryStore, *, now: datetime
) -> None:
    """OrderCreated -> take every line from stock and mark the order RESERVED, in ONE transaction (the
    order -- the step's record --, one conditional decrement per SKU); or, when a SKU is short,
    REJECTED + OrderRejected in one write of the order instead."""
    order_id = RESERVE_STOCK.id_of(envelope)
    lines = lines_of(envelope)
    order = steps.load(orders.get_order, order_id, envelope, unknown=UnknownOrder)
    if steps.duplicate(order.seen, envelope, order_id=order_id):
        return
    if order.status is Status.RESERVED or order.stock is not None:
        steps.acknowledge(envelope, "stock already reserved for the order", order_id=order_id)
        return
    if order.status not in RESERVABLE:
        # CANCELLED or REJECTED before the stock was taken: nothing to reserve.
        steps.acknowledge(
            envelope, f"order is {order.status}; nothing to reserve", metric=None, order_id=order_id
        )
        return
    # The order first: when a concurrent delivery already reserved, the order (not the stock it
    # consumed) is what the failed transaction is explained by.
    writes: list[BusinessWrite] = []
    if order.status is Status.CREATED:
        plan = plan_transition(order, Status.RESERVED, now=now, stock=StockHold.RESERVED)
        stale = RESERVE_STOCK.on_stale(plan)
        writes.append(orders.transition_write(plan, on_condition_failed=stale, cause=envelope, order=order))
    else:  # PAID before the reservation: the order stays PAID and records that it holds the stock
        writes.append(
            orders.stock_write(
                order, StockHold.RESERVED, envelope, expect=Status.PAID, on_condition_failed=_unchanged(order)
            )
        )
    for line in lines:
        writes.append(inventory.take_write(line, on_condition_failed=_shortage(line)))

    try:
        if not steps.commit(lambda: orders.apply(writes), envelope, order_id=order_id):
            return
    except StockShortage as shortage:
        _reject(envelope, orders, order, shortage, now=now)
        return
    record_metric("StockReserved", event_type=envelope.event_type)
    logger().info("stock reserved", extra={"order_id": order_id, "skus": len(lines)})


def _shortage(line: OrderLine) -> Callable[[dict[str, Any] | None], Exception]:
    def explain(old: dict[str, Any] | None) -> Exception:
        available = old.get("available") if old else None
        return StockShortage(line.sku, line.quantity, int(available) if available is not None else None)

    return explain


def _reject(
    envelope: Envelope,
    orders: OrderStore,
    order: Order,
    shortage: StockShortage,
    *,
    now: datetime,
) -> None:
    """Not enough stock is the order's OUTCOME: REJECTED + OrderRejected, in ONE write of the order
    that records the event it processed, acknowledged. Nothing was taken from stock (the reservation
    transaction was cancelled whole)."""
    rejection = Rejection(shortage.code, shortage.reason, shortage.sku)
    plan = plan_transition(order, Status.REJECTED, now=now, rejection=rejection)
    payload: dict[str, Any] = {
        "code": shortage.code,
        "reason": shortage.reason,
        "sku": shortage.sku,
        "requested": shortage.requested,
        "items": items_payload(order),
    }
    if shortage.available is not None:
        payload["available"] = shortage.available
    if order.payment_operation_id:
        # Paid before the stock ran out: whoever refunds needs the payment.
        payload["paymentOperationId"] = order.payment_operation_id
    rejected = order_event(
        ORDER_REJECTED, order, "rejected", payload=payload, causation_id=envelope.event_id, occurred_at=now
    )
    write = orders.transition_write(
        plan,
        on_condition_failed=RESERVE_STOCK.on_stale(plan, frozenset({Status.REJECTED})),
        cause=envelope,
        events=(rejected,),
        order=order,
    )
    if not steps.commit(lambda: orders.apply_one(write), envelope, order_id=order.order_id):
        return
    record_metric("OrderRejected", event_type=envelope.event_type)
    if order.status is Status.PAID:
        record_metric("PaidOrderRejected", event_type=envelope.event_type)
    logger().warning(
        "order rejected for stock",
        extra={"order_id": order.order_id, "sku": shortage.sku, "code": shortage.code},
    )


def release_stock(
    envelope: Envelope, orders: OrderStore, inventory: InventoryStore, *, now: datetime
) -> None:
    """OrderCancelled -> give back exactly what the order took, once: ONE transaction of the order's
    ``stock`` RESERVED -> RELEASED (the step's record, only if the order IS cancelled) and one increment
    per SKU."""
    order_id = RELEASE_STOCK.id_of(envelope)
    order = orders.get_order(order_id)
    if order is not None and steps.duplicate(order.seen, envelope, order_id=order_id):
        return
    hold = order.stock if order is not None else None
    if hold is StockHold.RELEASED:
        steps.acknowledge(envelope, "stock already released", order_id=order_id)
        return
    if order is not None and hold is StockHold.RESERVED:
        writes: list[BusinessWrite] = [
            orders.stock_write(
                order,
                StockHold.RELEASED,
                envelope,
                expect=Status.CANCELLED,
                on_condition_failed=_not_releasable(envelope, order_id),
            )
        ]
        writes.extend(inventory.give_back_write(line) for line in order.items)
        if not steps.commit(lambda: orders.apply(writes), envelope, order_id=order_id):
            return
        record_metric("StockReleased", event_type=envelope.event_type)
        logger().info("stock released", extra={"order_id": order_id, "skus": len(order.items)})
        return
    # Cancelled before inventory reserved anything; the reservation can no longer happen either (it is
    # conditional on the order's state, which is now CANCELLED for good).
    steps.acknowledge(envelope, "nothing was reserved; nothing to release", metric=None, order_id=order_id)


def _not_cancelled(envelope: Envelope, order_id: str) -> Callable[[dict[str, Any] | None], Exception]:
    """The release's condition failed because the order is not CANCELLED: the event lies; parked."""

    def explain(old: dict[str, Any] | None) -> Exception:
        status, _ = status_of(old)
        return IllegalTransition(
            f"event {envelope.event_id} says order {order_id} was cancelled, but it is {status or 'gone'}; "
            "stock not released. Parked: investigate the producer."
        )

    return explain


def _not_releasable(envelope: Envelope, order_id: str) -> Callable[[dict[str, Any] | None], Exception]:
    not_cancelled = _not_cancelled(envelope, order_id)

    def explain(old: dict[str, Any] | None) -> Exception:
        if old and old.get("stock") == str(StockHold.RELEASED):
            return AlreadyApplied(f"stock of order {order_id} already released")
        return not_cancelled(old)

    return explain


# -------------------------------------------------------------------------------------------------
# paid orders
# -------------------------------------------------------------------------------------------------


def _commit_transition(
    envelope: Envelope,
    orders: OrderStore,
    order: Order,
    plan: TransitionPlan,
    event: Envelope,
    rule: StepRule,
) -> bool:
    """The transition, recording ``envelope`` as processed and ``event`` as produced, in ONE write of
    the order; True when this delivery applied it (False: the order is already where ``rule.done``
    says)."""
    write = orders.transition_write(
        plan, on_condition_failed=rule.on_stale(plan), cause=envelope, events=(event,), order=order
    )
    return steps.commit(lambda: orders.apply_one(write), envelope, order_id=plan.entity_id)


def _order_payment(envelope: Envelope, rule: StepRule) -> tuple[str, str] | None:
    """``(orderId, operationId)`` of a payment outcome from payments, or None when there is nothing to
    do: a payment without an order (not an order payment)."""
    operation_id = rule.id_of(envelope)
    order_id = envelope.ids.get("orderId")
    if not order_id:
        logger().info(
            f"{envelope.event_type} without an orderId; not an order payment, ignored",
            extra={"operation_id": operation_id},
        )
        return None
    return order_id, operation_id


def mark_paid(envelope: Envelope, orders: OrderStore, *, now: datetime) -> None:
    """PaymentCompleted (from payments) with ``ids.orderId`` -> order PAID + OrderPaid, once.

    A payment that cannot be applied -- the order is unknown, CANCELLED, REJECTED, or already paid
    by another operation -- is recorded as an ORPHANED payment item and counted (``OrphanPayment``,
    alarmed), then acknowledged: retrying would not change the answer, and the money needs a human
    (refund or reconciliation), not a redelivery loop.
    """
    ids = _order_payment(envelope, MARK_PAID)
    if ids is None:
        return
    order_id, operation_id = ids

    order = orders.get_order(order_id)
    if order is None:
        _orphan(envelope, orders, order_id, operation_id, None, f"order {order_id} does not exist", now=now)
        return
    if steps.duplicate(order.seen, envelope, order_id=order_id):
        return
    if order.payment_operation_id == operation_id:
        steps.acknowledge(envelope, f"order already paid by operation {operation_id}", order_id=order_id)
        return
    if order.status not in PAYABLE:
        reason = (
            f"order {order_id} was already paid by operation {order.payment_operation_id}; this payment "
            "is a second one"
            if order.status is Status.PAID
            else f"order {order_id} is {order.status}; a payment cannot be applied to it"
        )
        _orphan(envelope, orders, order_id, operation_id, order.status, reason, now=now)
        return

    plan = plan_transition(order, Status.PAID, now=now, payment_operation_id=operation_id)
    # The lines travel with OrderPaid: shipping ships them and loyalty accrues points on them, and
    # neither reads the orders table for it.
    payload: dict[str, Any] = {"operationId": operation_id, "items": items_payload(order)}
    if envelope.ids.get("paymentId"):
        payload["paymentId"] = envelope.ids["paymentId"]
    paid = order_event(
        ORDER_PAID,
        order,
        "paid",
        payload=payload,
        ids={"operationId": operation_id},
        causation_id=envelope.event_id,
        occurred_at=now,
    )
    if _commit_transition(envelope, orders, order, plan, paid, MARK_PAID):
        record_metric("OrderPaid", event_type=envelope.event_type)
        logger().info("order paid", extra={"order_id": order_id, "operation_id": operation_id})


def _orphan(
    envelope: Envelope,
    orders: OrderStore,
    order_id: str,
    operation_id: str,
    order_status: Status | None,
    reason: str,
    *,
    now: datetime,
) -> None:
    write = orders.orphan_payment_write(
        order_id,
        operation_id,
        reason=reason,
        order_status=order_status,
        event_id=envelope.event_id,
        at=now_iso(now),
        on_condition_failed=steps.already(f"orphan payment {operation_id} already recorded"),
    )
    # The orphan item, written only if absent, is the step's record.
    if not steps.commit(lambda: orders.apply_one(write), envelope, order_id=order_id):
        return
    record_metric("OrphanPayment", event_type=envelope.event_type)
    logger().warning(
        "orphan payment recorded",
        extra={"order_id": order_id, "operation_id": operation_id, "reason": reason},
    )


# -------------------------------------------------------------------------------------------------
# failed payments
# -------------------------------------------------------------------------------------------------

PAYMENT_FAILED_CODE = "PaymentFailed"
PAYMENT_CANCELLED_CODE = "PaymentCancelled"
# Why the order is cancelled, by the payment outcome that says so.
_UNPAID = {
    PAYMENT_FAILED: (PAYMENT_FAILED_CODE, "failed"),
    PAYMENT_CANCELLED: (PAYMENT_CANCELLED_CODE, "was cancelled"),
}


def cancel_unpaid(envelope: Envelope, orders: OrderStore, *, now: datetime) -> None:
    """PaymentFailed or OperationCancelled (from payments: the payment failed, or its client cancelled
    it before it was submitted) with ``ids.orderId`` -> a CREATED or RESERVED order becomes
    CANCELLED with the failure recorded (``cancellation``), and its OrderCancelled releases the stock
    (the inventory consumer), once. An order that is already closed or paid is left as it is: nothing
    is reserved for it any more, or another payment paid it."""
    ids = _order_payment(envelope, CANCEL_UNPAID)
    if ids is None:
        return
    code, happened = _UNPAID[envelope.event_type]
    order_id, operation_id = ids
    order = orders.get_order(order_id)
    if order is not None and steps.duplicate(order.seen, envelope, order_id=order_id):
        return
    if order is None or order.status not in CANCELLABLE:
        status = order.status if order is not None else "unknown"
        steps.acknowledge(envelope, f"order is {status}; nothing to release", metric=None, order_id=order_id)
        return

    payload = envelope.payload or {}
    reason = f"payment {operation_id} {happened}: {payload.get('code', code)}: {payload.get('reason', '')}"
    plan = plan_transition(
        order,
        Status.CANCELLED,
        now=now,
        cancellation=Cancellation(code, reason.rstrip(": "), operation_id),
    )
    # The same event a customer's cancel publishes (identity [orderId, "cancelled"]): an order is
    # cancelled once, whoever wins the conditional write.
    cancelled = order_event(
        ORDER_CANCELLED,
        order,
        "cancelled",
        payload={
            "previousStatus": str(order.status),
            "items": items_payload(order),
            "reason": code,
        },
        ids={"operationId": operation_id},
        causation_id=envelope.event_id,
        occurred_at=now,
    )
    if _commit_transition(envelope, orders, order, plan, cancelled, CANCEL_UNPAID):
        record_metric("OrderCancelledForFailedPayment", event_type=envelope.event_type)
        logger().info(
            "order cancelled: its payment failed", extra={"order_id": order_id, "operation_id": operation_id}
        )


# The inventory consumer runs two steps, by the event's type.
INVENTORY_STEPS = steps.routes((RESERVE_STOCK, reserve_stock), (RELEASE_STOCK, release_stock))
