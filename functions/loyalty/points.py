"""Loyalty points: OrderPaid accrues points for the customer once per order; OrderRejected of a paid
order reverses them once. Both arrive through an EventBridge rule on the app's bus (the order service
never calls loyalty), unordered and at least once:

* a redelivery, a duplicate publish and a concurrent twin all commit at most once: the order's item
  (the step's record) and the balance change in ONE transaction, conditional on the order item that
  was read; the loser of a race re-reads (a transient retry) and decides again;
* a reversal that arrives before its accrual records a reversal of 0 points; the accrual, when it
  comes, is then recorded with an equal reversal and leaves the balance alone. Either order ends
  with the same balance;
* the rule is ``points_per_unit`` (stage config) points per unit ordered: the order lines travel
  with OrderPaid, so loyalty reads nothing of the order service's.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from loyalty.settings import Settings
from loyalty.store import OrderPoints, PointsStore
from relay import steps
from relay.ddb import BusinessWrite
from relay.envelope import Envelope
from relay.errors import DependencyUnavailable, InvalidInput
from relay.observability import logger, record_metric
from relay.state_machine import AlreadyApplied, now_iso
from relay.steps import StepRule

ORDER_PAID = "OrderPaid"
ORDER_REJECTED = "OrderRejected"
ACCRUE = StepRule("loyalty", (ORDER_PAID,), "orderId", routed_by="bus rule's event pattern")
REVERSE = StepRule("loyalty", (ORDER_REJECTED,), "orderId", routed_by="bus rule's event pattern")


class PointsDeps(Protocol):
    """What the points steps use (``loyalty.wiring.Wiring``)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def points(self) -> PointsStore: ...
    @property
    def clock(self) -> steps.Clock: ...


def _required(envelope: Envelope) -> tuple[str, str]:
    order_id = envelope.ids.get("orderId")
    customer_id = (envelope.payload or {}).get("customerId")
    if not order_id or not isinstance(customer_id, str) or not customer_id:
        raise InvalidInput(
            f"event {envelope.event_id} ({envelope.event_type}) needs ids.orderId and payload.customerId"
        )
    return customer_id, order_id


def points_earned(envelope: Envelope, points_per_unit: int) -> int:
    """``points_per_unit`` x the units of the order's lines (OrderPaid's ``payload.items``)."""
    items = (envelope.payload or {}).get("items")
    if not isinstance(items, list) or not items:
        raise InvalidInput(f"event {envelope.event_id} ({envelope.event_type}) has no payload.items")
    units = 0
    for index, item in enumerate(items):
        quantity = item.get("quantity") if isinstance(item, dict) else None
        if type(quantity) is not int or quantity < 1:
            raise InvalidInput(
                f"event {envelope.event_id}: payload.items[{index}].quantity must be a positive integer"
            )
        units += quantity
    return units * points_per_unit


def _changed(order_id: str, done: str) -> Any:
    def explain(old: dict[str, Any] | None) -> Exception:
        if old and old.get(done):
            return AlreadyApplied(f"order {order_id}: already recorded ({done})")
        return DependencyUnavailable(f"order {order_id}'s points changed since they were read; retrying")

    return explain


def _unrecorded(
    envelope: Envelope,
    store: PointsStore,
    customer_id: str,
    order_id: str,
    entry: Literal["accrual", "reversal"],
) -> tuple[bool, OrderPoints | None]:
    """The order's points, and whether this step still records its ``entry`` (False: acknowledged
    without effect, a duplicate or an entry already recorded)."""
    points = store.order_points(customer_id, order_id)
    if points is None:
        return True, None
    if steps.duplicate(points.seen, envelope, order_id=order_id):
        return False, points
    if (points.accrued_at if entry == "accrual" else points.reversed_at) is not None:
        done = "accrued" if entry == "accrual" else "reversed"
        steps.acknowledge(envelope, f"points already {done} for the order", order_id=order_id)
        return False, points
    return True, points


def _commit(
    envelope: Envelope, store: PointsStore, entry: BusinessWrite, balance: BusinessWrite | None, order_id: str
) -> bool:
    # The ledger item alone (nothing else moves) is a plain conditional write; with the balance, ONE
    # transaction.
    if balance is None:
        return steps.commit(lambda: store.apply_one(entry), envelope, order_id=order_id)
    return steps.commit(lambda: store.apply([entry, balance]), envelope, order_id=order_id)


def accrue(envelope: Envelope, deps: PointsDeps) -> None:
    now, store = deps.clock(), deps.points
    customer_id, order_id = _required(envelope)
    points = points_earned(envelope, deps.settings.points_per_unit)
    unrecorded, entry = _unrecorded(envelope, store, customer_id, order_id, "accrual")
    if not unrecorded:
        return
    offset = entry is not None and entry.reversed_at is not None
    at = now_iso(now)
    write = store.points_write(
        "accrual",
        customer_id,
        order_id,
        points,
        envelope,
        at=at,
        after_other=offset,
        on_condition_failed=_changed(order_id, "accruedAt"),
    )
    balance = store.balance_write(customer_id, points, at=at) if points and not offset else None
    if _commit(envelope, store, write, balance, order_id):
        record_metric("PointsAccrued", event_type=envelope.event_type)
        logger().info(
            "points accrued",
            extra={"order_id": order_id, "points": points, "offset_by_earlier_reversal": offset},
        )


def reverse(envelope: Envelope, deps: PointsDeps) -> None:
    now, store = deps.clock(), deps.points
    customer_id, order_id = _required(envelope)
    if not (envelope.payload or {}).get("paymentOperationId"):
        # Rejected before it was paid: it never earned points (the rule should not have sent it).
        why = "order was rejected before it was paid; no points to reverse"
        steps.acknowledge(envelope, why, metric=None, order_id=order_id)
        return
    unrecorded, entry = _unrecorded(envelope, store, customer_id, order_id, "reversal")
    if not unrecorded:
        return
    after_accrual = entry is not None and entry.accrued_at is not None
    points = (entry.accrued or 0) if entry is not None and after_accrual else 0
    at = now_iso(now)
    write = store.points_write(
        "reversal",
        customer_id,
        order_id,
        points,
        envelope,
        at=at,
        after_other=after_accrual,
        on_condition_failed=_changed(order_id, "reversedAt"),
    )
    balance = store.balance_write(customer_id, -points, at=at) if points else None
    if _commit(envelope, store, write, balance, order_id):
        record_metric("PointsReversed", event_type=envelope.event_type)
        logger().info("points reversed", extra={"order_id": order_id, "points": points})


# The points consumer runs two steps, by the event's type.
POINTS_STEPS = steps.routes((ACCRUE, accrue), (REVERSE, reverse))
