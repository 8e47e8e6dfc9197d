"""Invoice worker: invoice-requests queue (InvoiceRequested via SNS) -> invoice API (once) ->
COMPLETED + OperationCompleted. Domain: ``payments.invoice_step.issue_invoice``."""

from __future__ import annotations

from payments.invoice_step import issue_invoice
from payments.settings import INVOICE_WORKER
from payments.wiring import wiring
from relay.consumer import queue_handler

handler = queue_handler(
    wiring.checked(INVOICE_WORKER), lambda w, envelope, ctx: issue_invoice(envelope, ctx, w)
)
