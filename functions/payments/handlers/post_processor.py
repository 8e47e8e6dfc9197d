"""Post-processor: post-processing queue (PaymentCompleted via SNS) -> invoice input in S3 ->
INVOICE_PENDING + InvoiceRequested. Domain: ``payments.post_processing.post_process``."""

from __future__ import annotations

from payments.post_processing import post_process
from payments.settings import POST_PROCESSOR
from payments.wiring import wiring
from relay.consumer import queue_handler

handler = queue_handler(
    wiring.checked(POST_PROCESSOR), lambda w, envelope, ctx: post_process(envelope, ctx, w)
)
