"""Payment worker: payment-requests queue (PaymentRequested via SNS, and its own delayed
PaymentStatusCheckDue messages) -> legacy payment system. Domain:
``payments.payment_step.process_payment``."""

from __future__ import annotations

from payments.payment_step import process_payment
from payments.settings import PAYMENT_WORKER
from payments.wiring import wiring
from relay.consumer import queue_handler

handler = queue_handler(
    wiring.checked(PAYMENT_WORKER), lambda w, envelope, ctx: process_payment(envelope, ctx, w)
)
