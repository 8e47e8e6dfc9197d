"""Post-processing: PaymentCompleted -> POST_PROCESSING -> INVOICE_PENDING + InvoiceRequested (the
invoice input, derived from the request and the payment reference, named by its sha256)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from payments.operations import (
    Operation,
    Status,
)
from payments.step_rules import (
    POST_PROCESSING_STEP,
    StepDeps,
    advance,
    commit_step,
    invoice_input_path,
    keep,
    plan_step,
    runs,
    step_event,
)
from payments.store import result_of
from payments.subscriptions import (
    INVOICE_REQUESTED,
)
from relay.claim_check import get_json, load_json
from relay.envelope import Envelope
from relay.errors import (
    InvalidInput,
)

if TYPE_CHECKING:
    from datetime import datetime

    from relay.consumer import RecordContext


def invoice_input(
    operation: Operation, request: Mapping[str, Any], result: Mapping[str, Any]
) -> dict[str, Any]:
    document: dict[str, Any] = {
        "operationId": operation.operation_id,
        "paymentRef": str(result["paymentRef"]),
        "amount": request["amount"],
        "currency": request["currency"],
        "payer": request["payer"],
        "payee": request["payee"],
        "lines": [
            {"description": f"Payment {request['paymentId']}", "amount": request["amount"], "quantity": 1}
        ],
    }
    if request.get("orderId"):
        document["orderId"] = request["orderId"]
    return document


@runs(POST_PROCESSING_STEP)
def post_process(
    envelope: Envelope, ctx: RecordContext, deps: StepDeps, operation: Operation, now: datetime
) -> None:
    """PaymentCompleted -> POST_PROCESSING -> invoice input in S3 -> INVOICE_PENDING + InvoiceRequested."""
    operation_id = operation.operation_id
    if envelope.claim_check is not None:  # a PaymentCompleted of the layout before
        result = get_json(envelope.claim_check, s3_client=deps.s3)
    elif operation.result is not None:
        result = result_of(operation, load_json(operation.result, deps.s3, what="payment result"))
    else:
        raise InvalidInput(
            f"event {envelope.event_id} (PaymentCompleted): operation {operation_id} holds no payment result"
        )
    request = load_json(operation.request, deps.s3, what="request")

    if operation.status is Status.PAYMENT_COMPLETED:
        advanced = advance(deps, envelope, operation, Status.POST_PROCESSING, POST_PROCESSING_STEP, now=now)
        if advanced is None:
            return
        operation = advanced

    kept = keep(deps, invoice_input(operation, request, result), invoice_input_path(operation_id))
    # A large invoice input's claim check is kept on the operation too: a re-drive of the invoice step
    # (the sweeper's InvoiceRedriveDue) names no input of its own.
    large: dict[str, Any] = {"invoice_input_ref": kept.ref} if kept.ref is not None else {}
    plan = plan_step(deps.settings, operation, Status.INVOICE_PENDING, now=now, **large)
    # The invoice input derives from the request and the payment reference, both in the operation:
    # the event carries its sha256 (the invoice worker rebuilds it and must get the same bytes), or
    # its claim check when it is large.
    requested = step_event(
        INVOICE_REQUESTED,
        operation,
        envelope,
        "invoice-requested",
        now=now,
        payload={"invoiceInputSha256": kept.sha256} if kept.ref is None else None,
        claim_check=kept.ref,
    )
    commit_step(deps, envelope, operation, plan, requested, POST_PROCESSING_STEP, result_consumed=True)
