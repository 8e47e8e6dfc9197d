"""Failed payments: failed-payments queue (payments' PaymentFailed via SNS) -> a CREATED or RESERVED
order CANCELLED with the failure recorded, and OrderCancelled, which releases its stock; once.
Domain: ``orders.fulfilment.cancel_unpaid``."""

from __future__ import annotations

from orders.fulfilment import cancel_unpaid
from orders.settings import FAILED_PAYMENTS
from orders.wiring import wiring
from relay.consumer import queue_handler

handler = queue_handler(
    wiring.checked(FAILED_PAYMENTS),
    lambda w, envelope, _ctx: cancel_unpaid(envelope, w.orders, now=w.clock()),
)
