"""The order state machine.

    CREATED -> RESERVED -> PAID
    CREATED -> PAID                 the payment completed before inventory reserved the stock
    CREATED | RESERVED -> CANCELLED the customer cancelled (POST /orders/{id}/cancel)
    CREATED -> REJECTED             not enough stock: a business outcome, announced as OrderRejected
    PAID -> REJECTED                paid before the reservation, and then the stock was short (the
                                    OrderRejected event carries the payment so it can be refunded)

CANCELLED and REJECTED are terminal. Every transition is written conditionally on the state AND
version that were read (``store.OrderStore.transition_write``): the API, inventory and paid-orders
consumers change the same order concurrently, and a writer that lost the race fails instead of
overwriting -- it then re-reads and decides again. ``plan_transition`` refuses an illegal transition
before anything is sent.

Orders never expire (no ``expiresAt``): they are business records. Only published outbox rows and
idempotency records are cleaned up by TTL.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from relay.errors import PermanentError


class Status(enum.StrEnum):
    CREATED = "CREATED"
    RESERVED = "RESERVED"
    PAID = "PAID"
    CANCELLED = "CANCELLED"
    REJECTED = "REJECTED"

    @property
    def terminal(self) -> bool:
        return not ALLOWED[self]


ALLOWED: dict[Status, frozenset[Status]] = {
    Status.CREATED: frozenset({Status.RESERVED, Status.PAID, Status.CANCELLED, Status.REJECTED}),
    Status.RESERVED: frozenset({Status.PAID, Status.CANCELLED}),
    Status.PAID: frozenset({Status.REJECTED}),
    Status.CANCELLED: frozenset(),
    Status.REJECTED: frozenset(),
}

CANCELLABLE = frozenset({Status.CREATED, Status.RESERVED})
PAYABLE = frozenset({Status.CREATED, Status.RESERVED})
# Stock is reserved for an order that is still wanted and has no reservation yet.
RESERVABLE = frozenset({Status.CREATED, Status.PAID})


class IllegalTransition(PermanentError):
    """A transition the state machine does not allow. Never applied; a consumer parks the message
    that asked for it, the API answers 409."""


class AlreadyApplied(Exception):
    """The change this delivery wants is already in place (a duplicate or a concurrent delivery won):
    acknowledge without effect. Never retried or parked."""


def now_iso(moment: datetime | None = None) -> str:
    return (
        (moment or datetime.now(UTC))
        .astimezone(UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


@dataclass(frozen=True)
class OrderLine:
    sku: str
    quantity: int


@dataclass(frozen=True)
class HistoryEntry:
    status: str
    at: str


@dataclass(frozen=True)
class Rejection:
    code: str  # InsufficientStock | UnknownSku
    reason: str
    sku: str


@dataclass(frozen=True)
class Order:
    order_id: str
    customer_id: str
    currency: str
    items: tuple[OrderLine, ...]
    status: Status
    version: int
    correlation_id: str
    created_at: str
    updated_at: str
    history: tuple[HistoryEntry, ...] = ()
    rejection: Rejection | None = None
    payment_operation_id: str | None = None

    def ids(self) -> dict[str, str]:
        return {"orderId": self.order_id}


@dataclass(frozen=True)
class TransitionPlan:
    """A legal transition of one order, planned from the state and version that were read."""

    order_id: str
    source: Status
    target: Status
    expected_version: int
    at: str
    set_attributes: dict[str, Any] = field(default_factory=dict)

    @property
    def next_version(self) -> int:
        return self.expected_version + 1


def plan_transition(
    order: Order, target: Status, *, now: datetime | None = None, **attributes: Any
) -> TransitionPlan:
    """Check ``order.status -> target`` against the state machine; describe the write that applies it.

    ``attributes`` are domain fields set with the transition (``rejection=``, ``payment_operation_id=``).
    """
    if target not in ALLOWED[order.status]:
        allowed = ", ".join(sorted(ALLOWED[order.status])) or "none, it is terminal"
        raise IllegalTransition(
            f"order {order.order_id}: {order.status} -> {target} is not a legal transition "
            f"(allowed from {order.status}: {allowed}); not applied."
        )
    return TransitionPlan(
        order_id=order.order_id,
        source=order.status,
        target=target,
        expected_version=order.version,
        at=now_iso(now),
        set_attributes=attributes,
    )


def merge_lines(lines: list[OrderLine] | tuple[OrderLine, ...]) -> tuple[OrderLine, ...]:
    """One line per SKU (quantities added), in first-seen order: a transaction may touch an item
    only once, so two lines of the same SKU must become one conditional decrement."""
    totals: dict[str, int] = {}
    for line in lines:
        totals[line.sku] = totals.get(line.sku, 0) + line.quantity
    return tuple(OrderLine(sku, quantity) for sku, quantity in totals.items())
