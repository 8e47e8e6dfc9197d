"""The invoice step: InvoiceRequested -> the invoice API, once, under ``{operationId}:invoice`` ->
COMPLETED + OperationCompleted."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from payments.invoices import InvoiceRefused, invoice_key
from payments.operations import (
    Operation,
    Status,
)
from payments.post_processing import invoice_input
from payments.step_rules import (
    INVOICE_STEP,
    StepDeps,
    commit_step,
    end_unsuccessfully,
    plan_step,
    retry_later,
    runs,
    step_event,
)
from payments.subscriptions import (
    OPERATION_COMPLETED,
)
from relay.claim_check import canonical_bytes, get_json, load_json
from relay.envelope import Envelope
from relay.errors import (
    ClaimCheckMismatch,
    TransientError,
)

if TYPE_CHECKING:
    from datetime import datetime

    from relay.consumer import RecordContext


@runs(INVOICE_STEP)
def issue_invoice(
    envelope: Envelope, ctx: RecordContext, deps: StepDeps, operation: Operation, now: datetime
) -> None:
    """InvoiceRequested -> invoice API (once) -> COMPLETED + OperationCompleted."""
    operation_id = operation.operation_id
    document = _invoice_input(envelope, operation, deps)
    charged = f"payment {operation.payment_ref} was charged and is not refunded"
    try:
        # Guarded by the operation's state (only INVOICE_PENDING runs this, and the transition below
        # is conditional on it) and by the invoice API's own key: a repeat returns the same invoice.
        issued = deps.invoices.issue(document, idempotency_key=invoice_key(operation_id))
    except InvoiceRefused as refused:
        # Partial success, said so: charged, invoice refused for good.
        end_unsuccessfully(
            deps,
            envelope,
            operation,
            Status.INVOICE_FAILED,
            "InvoiceRefused",
            f"the invoice API refused the invoice: {refused.reason}; {charged}",
            now=now,
        )
        return
    except TransientError as exc:
        spent = retry_later(deps, ctx, operation, exc)
        if spent is None:
            raise
        end_unsuccessfully(
            deps,
            envelope,
            operation,
            Status.INVOICE_FAILED,
            "InvoiceRetryBudgetSpent",
            f"{spent}; {charged}",
            now=now,
        )
        return
    invoice_id = str(issued["invoiceId"])
    plan = plan_step(deps.settings, operation, Status.COMPLETED, now=now, invoice_id=invoice_id)
    completed = step_event(
        OPERATION_COMPLETED,
        operation,
        envelope,
        "operation-completed",
        now=now,
        payload={"invoiceId": invoice_id, "paymentRef": operation.payment_ref},
    )
    commit_step(deps, envelope, operation, plan, completed, INVOICE_STEP)


def _invoice_input(envelope: Envelope, operation: Operation, deps: StepDeps) -> Mapping[str, Any]:
    """The invoice input InvoiceRequested names: rebuilt from the operation and checked against the
    sha256 the event carries, or read from its claim check when large; an event of the layout before
    names the operation's claim check."""
    expected = (envelope.payload or {}).get("invoiceInputSha256")
    if expected:
        request = load_json(operation.request, deps.s3, what="request")
        document = invoice_input(operation, request, {"paymentRef": operation.payment_ref})
        actual = hashlib.sha256(canonical_bytes(document)).hexdigest()
        if actual != expected:
            raise ClaimCheckMismatch(
                f"event {envelope.event_id} (InvoiceRequested): the invoice input rebuilt from operation "
                f"{operation.operation_id} has sha256 {actual[:12]}…, the event names {str(expected)[:12]}…; "
                "the operation changed after post-processing. Not invoiced."
            )
        return document
    ref = envelope.claim_check or operation.invoice_input_ref
    if ref is None:
        # A re-drive of the step (InvoiceRedriveDue) names no input: rebuilt from the operation, as the
        # event that named its sha256 would have had it.
        request = load_json(operation.request, deps.s3, what="request")
        return invoice_input(operation, request, {"paymentRef": operation.payment_ref})
    stored: Mapping[str, Any] = get_json(ref, s3_client=deps.s3)
    return stored
