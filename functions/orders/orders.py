"""The order state machine.

    CREATED -> RESERVED -> PAID
    CREATED -> PAID                 the payment completed before inventory reserved the stock
    CREATED | RESERVED -> CANCELLED the customer cancelled (POST /orders/{id}/cancel)
    CREATED -> REJECTED             not enough stock: a business outcome, announced as OrderRejected
    PAID -> REJECTED                paid before the reservation, and then the stock was short (the
                                    OrderRejected event carries the payment so it can be refunded)

CANCELLED and REJECTED are terminal. The rules of every entity's state machine (conditional writes
from the state AND version that were read, the history entry, stale and illegal transitions) are the
kernel's (``relay.state_machine``): the API, inventory and paid-orders consumers change the same order
concurrently, and a writer that lost the race fails instead of overwriting -- it then re-reads and
decides again.

Orders never expire (no ``expiresAt``): they are business records. Only idempotency records are
cleaned up by TTL.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from relay.state_machine import AlreadyApplied, IllegalTransition, StateMachine, Transition, now_iso
from relay.steps import UnknownEntity

__all__ = ["AlreadyApplied", "IllegalTransition", "now_iso"]


class Status(enum.StrEnum):
    CREATED = "CREATED"
    RESERVED = "RESERVED"
    PAID = "PAID"
    CANCELLED = "CANCELLED"
    REJECTED = "REJECTED"

    @property
    def terminal(self) -> bool:
        return not ALLOWED[self]


class StockHold(enum.StrEnum):
    """What the order holds of the stock (its ``stock`` attribute): taken for it by inventory, or given
    back after it was cancelled. The order is the step's record, as for every other step."""

    RESERVED = "RESERVED"
    RELEASED = "RELEASED"


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


MACHINE = StateMachine("order", ALLOWED)


class UnknownOrder(UnknownEntity):
    """An event names an order that does not exist."""

    ENTITY = "order"


TransitionPlan = Transition[Status]


@dataclass(frozen=True)
class OrderLine:
    sku: str
    quantity: int


@dataclass(frozen=True)
class HistoryEntry:
    status: str
    at: str

    def entry(self) -> dict[str, str]:
        return {"status": self.status, "at": self.at}


@dataclass(frozen=True)
class Cancellation:
    """Why an order was cancelled by the system rather than by its customer."""

    code: str  # PaymentFailed, PaymentCancelled
    reason: str
    operation_id: str


@dataclass(frozen=True)
class Rejection:
    code: str  # InsufficientStock | UnknownSku
    reason: str
    sku: str


@dataclass(frozen=True)
class Shipment:
    """The shipment the shipping API made for a paid order (``REQUESTED``), or its refusal (``REFUSED``,
    with the reason): recorded once, by the shipping consumer."""

    status: str  # REQUESTED | REFUSED
    at: str
    event_id: str
    shipment_id: str | None = None
    reason: str | None = None


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
    cancellation: Cancellation | None = None
    payment_operation_id: str | None = None
    shipment: Shipment | None = None
    stock: StockHold | None = None
    # The last event a step processed -> its payload hash (``relay.entity_events``).
    seen: dict[str, str] = field(default_factory=dict)

    def ids(self) -> dict[str, str]:
        return {"orderId": self.order_id}


def plan_transition(order: Order, target: Status, *, now: datetime, **attributes: Any) -> TransitionPlan:
    """Check ``order.status -> target`` against the state machine; describe the write that applies it.

    ``attributes`` are domain fields set with the transition (``rejection=``, ``payment_operation_id=``).
    """
    at = now_iso(now)
    return MACHINE.plan(
        order.order_id,
        order.status,
        order.version,
        target,
        at=at,
        entry=HistoryEntry(str(target), at).entry(),
        **attributes,
    )


def merge_lines(lines: list[OrderLine] | tuple[OrderLine, ...]) -> tuple[OrderLine, ...]:
    """One line per SKU (quantities added), in first-seen order: a transaction may touch an item
    only once, so two lines of the same SKU must become one conditional decrement."""
    totals: dict[str, int] = {}
    for line in lines:
        totals[line.sku] = totals.get(line.sku, 0) + line.quantity
    return tuple(OrderLine(sku, quantity) for sku, quantity in totals.items())
