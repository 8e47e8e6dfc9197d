"""Post-processor: post-processing queue (PaymentCompleted via SNS) -> invoice input in S3 ->
INVOICE_PENDING + InvoiceRequested. Domain: ``payments.steps.post_process``."""

from __future__ import annotations

from payments.settings import POST_PROCESSOR
from payments.steps import post_process
from payments.wiring import wiring
from relay.consumer import queue_handler

handler = queue_handler(
    wiring.checked(POST_PROCESSOR), lambda w, envelope, ctx: post_process(envelope, ctx, w)
)
