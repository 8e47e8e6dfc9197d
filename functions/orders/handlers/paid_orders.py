"""Paid orders: paid-orders queue (payments' PaymentCompleted via SNS) -> order PAID + OrderPaid,
once; a payment that cannot be applied is recorded as an orphan and alarmed, never retried forever.
Domain: ``orders.fulfilment.mark_paid``."""

from __future__ import annotations

from orders.fulfilment import mark_paid
from orders.settings import PAID_ORDERS
from orders.wiring import wiring
from relay.consumer import queue_handler

handler = queue_handler(
    wiring.checked(PAID_ORDERS), lambda w, envelope, _ctx: mark_paid(envelope, w.orders, now=w.clock())
)
