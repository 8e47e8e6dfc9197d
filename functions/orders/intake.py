"""The HTTP side: place an order (201), describe it, cancel it.

Placing is ONE conditional PutItem: the CREATED order with its ``OrderCreated`` inside it
(``relay.entity_events``) and its request's sha256. Nothing is published from here: the event reaches
SNS via the table stream, so a crash after the write cannot lose it and a crash before it stores
nothing. With an Idempotency-Key the orderId derives from the caller and the key, so the item itself
refuses a second order and the failed condition's ALL_OLD answers the retry: the same body gets the
same order (200), another body a 422. Without a key the id is random.

Cancelling is ONE conditional UpdateItem too: CANCELLED (only from CREATED or RESERVED, and only
from the version that was read) with ``OrderCancelled`` inside the order. A concurrent consumer that
moved the order on in between (RESERVED, PAID) makes the condition fail; the cancel then re-reads
and decides again, so "cancel" never overwrites "paid".
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from orders.models import (
    CancellationView,
    HistoryView,
    OrderItem,
    OrderRequest,
    OrderView,
    RejectionView,
    ShipmentView,
)
from orders.orders import (
    CANCELLABLE,
    HistoryEntry,
    Order,
    OrderLine,
    Status,
    now_iso,
    plan_transition,
)
from orders.store import OrderStore, order_from_item, order_key, status_of
from orders.subscriptions import ORDER_CANCELLED, ORDER_CREATED
from relay.api_models import ApiModel
from relay.envelope import Envelope, new_envelope
from relay.errors import ConcurrentWrite
from relay.request_keys import EntityExists, IdempotencyKeyMismatch, request_sha256

__all__ = ["IdempotencyKeyMismatch"]

CANCEL_ATTEMPTS = 3


class OrderNotFound(Exception):
    def __init__(self, order_id: str) -> None:
        super().__init__(f"no order {order_id}")


class NotCancellable(Exception):
    """The order is in a state the customer can no longer cancel from (answered 409)."""

    def __init__(self, order: Order) -> None:
        super().__init__(
            f"order {order.order_id} is {order.status}; only CREATED or RESERVED orders can be cancelled"
        )
        self.status = order.status


class _Changed(Exception):
    """The order changed between the read and the conditional write."""


@dataclass(frozen=True)
class Placed:
    order: Order
    replayed: bool


@dataclass(frozen=True)
class Cancelled:
    order: Order
    already: bool  # it was CANCELLED before this request: nothing written


def order_event(
    event_type: str,
    order: Order,
    step: str,
    *,
    payload: dict[str, Any],
    ids: dict[str, str] | None = None,
    causation_id: str | None = None,
    occurred_at: datetime,
) -> Envelope:
    """An order event. Deterministic eventId (identity [orderId, step]): re-doing a step after a
    crash re-creates the SAME event, which every consumer then deduplicates."""
    return new_envelope(
        event_type,
        identity=[order.order_id, step],
        ids={**order.ids(), **(ids or {})},
        payload={"customerId": order.customer_id, **payload},
        correlation_id=order.correlation_id,
        causation_id=causation_id,
        occurred_at=occurred_at,
    )


def items_payload(order: Order) -> list[dict[str, Any]]:
    return [{"sku": line.sku, "quantity": line.quantity} for line in order.items]


def place_order(
    request: OrderRequest,
    *,
    idempotency_key: str | None,
    correlation_id: str,
    store: OrderStore,
    caller: str = "anonymous",
    request_key_items: bool = False,
    now: datetime,
) -> Placed:
    sha256 = request_sha256(request.to_document())
    if idempotency_key is not None and request_key_items:
        bound = store.request_keys.replayed(idempotency_key, sha256)
        if bound is not None:
            found = store.get_order(bound.entity_id)
            if found is None:  # bound but not created: impossible (one transaction) unless deleted by hand
                raise OrderNotFound(bound.entity_id)
            return Placed(found, replayed=True)
    order_id = store.new_id(caller, idempotency_key)
    at = now_iso(now)
    order = Order(
        order_id=order_id,
        customer_id=request.customer_id,
        currency=request.currency,
        items=tuple(OrderLine(item.sku, item.quantity) for item in request.items),
        status=Status.CREATED,
        version=1,
        correlation_id=correlation_id,
        created_at=at,
        updated_at=at,
        history=(HistoryEntry(str(Status.CREATED), at),),
    )
    created = order_event(
        ORDER_CREATED,
        order,
        "created",
        payload={"currency": order.currency, "items": items_payload(order)},
        occurred_at=now,
    )
    try:
        store.create_order(order, created, request_sha256=sha256)
    except EntityExists as exists:
        stored = store.existing(
            exists, order_key(order_id), sha256=sha256, idempotency_key=idempotency_key, entity_id=order_id
        )
        return Placed(order_from_item(stored), replayed=True)
    return Placed(order, replayed=False)


def cancel_order(store: OrderStore, order_id: str, *, now: datetime) -> Cancelled:
    """CREATED | RESERVED -> CANCELLED + OrderCancelled. A repeated cancel of a CANCELLED order is
    answered with the order (a client retry after a lost response), without a second event."""
    for _ in range(CANCEL_ATTEMPTS):
        order = store.get_order(order_id)
        if order is None:
            raise OrderNotFound(order_id)
        if order.status is Status.CANCELLED:
            return Cancelled(order, already=True)
        if order.status not in CANCELLABLE:
            raise NotCancellable(order)
        plan = plan_transition(order, Status.CANCELLED, now=now)
        event = order_event(
            ORDER_CANCELLED,
            order,
            "cancelled",
            payload={"previousStatus": str(order.status), "items": items_payload(order)},
            occurred_at=now,
        )
        try:
            store.apply_one(
                store.transition_write(
                    plan, on_condition_failed=_changed(order), events=(event,), order=order
                )
            )
        except _Changed:
            continue  # moved on concurrently (e.g. RESERVED or PAID): read again and decide again
        cancelled = dataclasses.replace(
            order,
            status=Status.CANCELLED,
            version=plan.next_version,
            updated_at=plan.at,
            history=(*order.history, HistoryEntry(str(Status.CANCELLED), plan.at)),
        )
        return Cancelled(cancelled, already=False)
    raise ConcurrentWrite(
        f"order {order_id} kept changing while it was being cancelled ({CANCEL_ATTEMPTS} attempts); retry"
    )


def _changed(order: Order) -> Any:
    def explain(old: dict[str, Any] | None) -> Exception:
        status, version = status_of(old)
        return _Changed(
            f"order {order.order_id} is {status} v{version}, read {order.status} v{order.version}"
        )

    return explain


def _view_of[V: ApiModel](view: type[V], record: object | None) -> V | None:
    """What the order records (its rejection, cancellation, shipment) as the API shows it: the fields
    the view declares."""
    if record is None:
        return None
    return view(**{name: getattr(record, name) for name in view.model_fields})


def order_view(order: Order) -> OrderView:
    return OrderView(
        order_id=order.order_id,
        status=str(order.status),
        customer_id=order.customer_id,
        currency=order.currency,
        items=[OrderItem(sku=line.sku, quantity=line.quantity) for line in order.items],
        history=[HistoryView(status=h.status, at=h.at) for h in order.history],
        rejection=_view_of(RejectionView, order.rejection),
        cancellation=_view_of(CancellationView, order.cancellation),
        payment_operation_id=order.payment_operation_id,
        shipment=_view_of(ShipmentView, order.shipment),
        created_at=order.created_at,
        updated_at=order.updated_at,
    )


def describe_order(store: OrderStore, order_id: str) -> OrderView | None:
    order = store.get_order(order_id)
    return order_view(order) if order is not None else None
