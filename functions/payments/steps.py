"""The consumers' domain: the payment, post-processing and invoice steps of an operation.

Every step follows the same rules (the seed notes' four failure windows):

* a delivery whose processed-event marker exists, or whose operation is already past the step, is
  acknowledged without effect (a duplicate or a late redelivery);
* the state change, the outbox row of the next event and the processed-event marker commit in ONE
  ``TransactWriteItems`` (``relay.idempotency.commit_once``), conditional on the state and version
  that were read -- so a crash after the commit and before the acknowledgement only causes a
  redelivery that changes nothing;
* anything written to S3 before that commit (result, invoice input) is written under a fixed key,
  so a retry after a crash overwrites it with the same bytes;
* external calls carry a stable downstream idempotency key (``{operationId}:payment``,
  ``{operationId}:invoice``), so a retry after a lost reply charges or invoices nothing more.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Concatenate, Protocol

from payments.invoices import invoice_key
from payments.legacy import LegacyStatus, payment_key
from payments.operations import (
    AlreadyApplied,
    IllegalTransition,
    Operation,
    OperationError,
    Status,
    Step,
    TransitionPlan,
    now_iso,
    parse_iso,
    plan_transition,
)
from payments.settings import MAX_SQS_DELAY_SECONDS, Settings
from payments.store import status_of
from payments.subscriptions import (
    INVOICE_REQUESTED,
    OPERATION_COMPLETED,
    PAYMENT_COMPLETED,
    PAYMENT_FAILED,
    PAYMENT_REQUESTED,
    PAYMENT_STATUS_CHECK_DUE,
)
from relay.backoff import backoff_delay
from relay.claim_check import get_json, put_json
from relay.envelope import ClaimCheckRef, Envelope, new_envelope
from relay.errors import InvalidInput, PermanentError
from relay.idempotency import BusinessWrite, CommitResult
from relay.observability import logger, record_metric
from relay.side_effects import run_once
from relay.state_machine import explain_stale

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from payments.invoices import InvoiceApiClient
    from payments.legacy import LegacyPaymentsClient
    from payments.store import OperationStore
    from relay.consumer import RecordContext


# States in which a step's work is already done (its outcome committed).
PAYMENT_DONE = frozenset(
    {
        Status.PAYMENT_COMPLETED,
        Status.POST_PROCESSING,
        Status.INVOICE_PENDING,
        Status.COMPLETED,
        Status.FAILED,
    }
)
POST_PROCESSING_DONE = frozenset({Status.INVOICE_PENDING, Status.COMPLETED})
INVOICE_DONE = frozenset({Status.COMPLETED})


@dataclasses.dataclass(frozen=True)
class StepRule:
    """Which events a step handles, where it is already done, and which states it runs from."""

    event_types: tuple[str, ...]
    step: str
    done: frozenset[Status]
    runs_from: frozenset[Status]


PAYMENT_STEP = StepRule(
    (PAYMENT_REQUESTED, PAYMENT_STATUS_CHECK_DUE),
    "payment step",
    PAYMENT_DONE,
    frozenset({Status.PENDING, Status.PAYMENT_PROCESSING}),
)
POST_PROCESSING_STEP = StepRule(
    (PAYMENT_COMPLETED,),
    "post-processing",
    POST_PROCESSING_DONE,
    frozenset({Status.PAYMENT_COMPLETED, Status.POST_PROCESSING}),
)
INVOICE_STEP = StepRule(
    (INVOICE_REQUESTED,), "invoice step", INVOICE_DONE, frozenset({Status.INVOICE_PENDING})
)


class StepDeps(Protocol):
    """What the steps use (``payments.wiring.Wiring`` provides it; tests may pass their own): the
    settings, the store, S3 and the claim-check bucket, the legacy system and the invoice API."""

    @property
    def settings(self) -> Settings: ...
    @property
    def store(self) -> OperationStore: ...
    @property
    def s3(self) -> S3Client: ...
    @property
    def bucket(self) -> str: ...
    @property
    def legacy(self) -> LegacyPaymentsClient: ...
    @property
    def invoices(self) -> InvoiceApiClient: ...


class UnknownOperation(PermanentError):
    """The event names an operation that does not exist (never created, or expired by TTL)."""


# -------------------------------------------------------------------------------------------------
# shared rules
# -------------------------------------------------------------------------------------------------


def _expect(envelope: Envelope, *event_types: str) -> str:
    if envelope.event_type not in event_types:
        raise InvalidInput(
            f"event {envelope.event_id} has eventType {envelope.event_type}; this consumer handles "
            f"{', '.join(event_types)}. Check the subscription's filter policy."
        )
    operation_id = envelope.ids.get("operationId")
    if not operation_id:
        raise InvalidInput(f"event {envelope.event_id} ({envelope.event_type}) has no ids.operationId")
    return operation_id


def _load(deps: StepDeps, operation_id: str, envelope: Envelope) -> Operation:
    operation = deps.store.get_operation(operation_id)
    if operation is None:
        raise UnknownOperation(
            f"event {envelope.event_id} ({envelope.event_type}) names operation {operation_id}, which does "
            "not exist (never created, or expired). Parked."
        )
    return operation


def runs[**P](
    rule: StepRule,
) -> Callable[
    [Callable[Concatenate[Envelope, RecordContext, StepDeps, Operation, P], None]],
    Callable[Concatenate[Envelope, RecordContext, StepDeps, P], None],
]:
    """A step's entry: ``_begin`` decides whether (and on which operation) the body runs."""

    def wrap(
        body: Callable[Concatenate[Envelope, RecordContext, StepDeps, Operation, P], None],
    ) -> Callable[Concatenate[Envelope, RecordContext, StepDeps, P], None]:
        @functools.wraps(body)
        def step(
            envelope: Envelope, ctx: RecordContext, deps: StepDeps, /, *args: P.args, **options: P.kwargs
        ) -> None:
            operation = _begin(envelope, deps, rule)
            if operation is not None:
                body(envelope, ctx, deps, operation, *args, **options)

        return step

    return wrap


def _begin(envelope: Envelope, deps: StepDeps, rule: StepRule) -> Operation | None:
    """How every step starts: the operation the event names, or None when the delivery is
    acknowledged without effect (already processed, or the step is already done). An operation in a
    state the step cannot run from is an IllegalTransition: parked with the reason."""
    step, done, runs_from = rule.step, rule.done, rule.runs_from
    operation_id = _expect(envelope, *rule.event_types)
    if deps.store.already_processed(envelope):
        _skip(envelope, None, "event already processed")
        return None
    operation = _load(deps, operation_id, envelope)
    if operation.status in done:
        _skip(envelope, operation, f"{step} already done")
        return None
    if operation.status not in runs_from:
        raise IllegalTransition(
            f"operation {operation_id} is {operation.status}; {envelope.event_type} expects "
            f"{' or '.join(sorted(runs_from))}, the {step} cannot run. Not applied."
        )
    return operation


def _skip(envelope: Envelope, operation: Operation | None, why: str) -> None:
    record_metric("Duplicate", event_type=envelope.event_type)
    logger().info(
        "acknowledged without effect",
        extra={
            "reason": why,
            "operation_id": operation.operation_id if operation else envelope.ids.get("operationId"),
            "status": str(operation.status) if operation else None,
        },
    )


def on_stale(
    plan: TransitionPlan, done: frozenset[Status]
) -> Callable[[Mapping[str, Any] | None], Exception]:
    """A failed transition condition (``relay.state_machine.explain_stale``): only the operation's
    own consumers move it, one step each, so a state other than the one read (and not ``done``) means
    the step cannot apply: IllegalTransition, parked with the reason, never applied."""
    return explain_stale(plan, done, elsewhere="illegal")


def _advance(
    deps: StepDeps, operation: Operation, target: Status, done: frozenset[Status]
) -> Operation | None:
    """Apply one transition WITHOUT a marker (the step's work is still ahead). Returns the operation
    as it is now, or None if another delivery already finished the step."""
    plan = plan_transition(operation, target)
    try:
        deps.store.apply(
            [deps.store.transition_write(plan, on_condition_failed=on_stale(plan, done | {target}))]
        )
    except AlreadyApplied:
        current = deps.store.get_operation(operation.operation_id)
        if current is None or current.status in done:
            return None
        return current  # a concurrent delivery moved it to ``target``: continue from there
    return dataclasses.replace(
        operation,
        status=target,
        version=plan.next_version,
        steps=(*operation.steps, Step(**plan.entry)),
        updated_at=plan.at,
    )


def _commit(deps: StepDeps, envelope: Envelope, writes: list[BusinessWrite], operation: Operation) -> None:
    try:
        result = deps.store.commit_once(envelope, writes)
    except AlreadyApplied as exc:
        _skip(envelope, operation, str(exc))
        return
    if result is CommitResult.DUPLICATE:
        return  # counted and logged by the kernel
    logger().info(
        "step committed", extra={"operation_id": operation.operation_id, "event_type": envelope.event_type}
    )


def _commit_step(
    deps: StepDeps,
    envelope: Envelope,
    operation: Operation,
    plan: TransitionPlan,
    event: Envelope,
    *,
    done: frozenset[Status],
) -> None:
    """A step's outcome: the transition, the next event's outbox row and the marker, in ONE
    transaction (a failed condition is explained by ``on_stale`` against ``done``)."""
    writes = [
        deps.store.transition_write(plan, on_condition_failed=on_stale(plan, done)),
        deps.store.outbox_write(operation.operation_id, event),
    ]
    _commit(deps, envelope, writes, operation)


def _event(
    event_type: str,
    operation: Operation,
    cause: Envelope,
    step: str,
    *,
    payload: Mapping[str, Any] | None = None,
    claim_check: ClaimCheckRef | None = None,
    ids: Mapping[str, str] | None = None,
) -> Envelope:
    # Deterministic eventId: re-doing the step after a crash re-creates the SAME event.
    return new_envelope(
        event_type,
        identity=[operation.operation_id, step],
        ids={**operation.ids(), **(ids or {})},
        payload=payload,
        claim_check=claim_check,
        correlation_id=operation.correlation_id,
        causation_id=cause.event_id,
    )


def _fail(
    deps: StepDeps,
    envelope: Envelope,
    operation: Operation,
    code: str,
    message: str,
    *,
    now: datetime | None = None,
) -> None:
    plan = plan_transition(
        operation,
        Status.FAILED,
        error=OperationError(code, message),
        ttl_days=deps.settings.failed_ttl_days,
        now=now,
    )
    failed = _event(
        PAYMENT_FAILED, operation, envelope, "payment-failed", payload={"code": code, "reason": message}
    )
    _commit_step(deps, envelope, operation, plan, failed, done=PAYMENT_DONE)
    logger().warning("payment failed", extra={"operation_id": operation.operation_id, "code": code})


def result_path(operation_id: str) -> str:
    return f"payments/{operation_id}/result.json"


def invoice_input_path(operation_id: str) -> str:
    return f"payments/{operation_id}/invoice-input.json"


# -------------------------------------------------------------------------------------------------
# payment step
# -------------------------------------------------------------------------------------------------


def legacy_request(operation: Operation, request: Mapping[str, Any]) -> dict[str, Any]:
    """The body sent to the legacy system: derived only from the stored request, so every retry and
    status check sends the same bytes under the same key."""
    body = {
        "operationId": operation.operation_id,
        "paymentId": request["paymentId"],
        "amount": request["amount"],
        "currency": request["currency"],
        "payer": request["payer"],
        "payee": request["payee"],
        "details": request.get("details") or {},
    }
    if request.get("orderId"):
        body["orderId"] = request["orderId"]
    return body


@runs(PAYMENT_STEP)
def process_payment(
    envelope: Envelope,
    ctx: RecordContext,
    deps: StepDeps,
    operation: Operation,
    *,
    now: datetime | None = None,
) -> None:
    """PaymentRequested / PaymentStatusCheckDue -> call the legacy system -> PAYMENT_COMPLETED, FAILED,
    or a delayed status check."""
    operation_id = operation.operation_id

    # Read (and verify) the claim check BEFORE changing state: a tampered request is parked while
    # the operation still shows where it stopped.
    request = get_json(operation.request_ref, s3_client=deps.s3)
    if operation.status is Status.PENDING:
        advanced = _advance(deps, operation, Status.PAYMENT_PROCESSING, PAYMENT_DONE)
        if advanced is None:
            _skip(envelope, operation, "payment step finished by a concurrent delivery")
            return
        operation = advanced

    # The call may take long: keep the message invisible meanwhile, so no second consumer starts it.
    with ctx.heartbeat():
        outcome = deps.legacy.submit(
            legacy_request(operation, request), idempotency_key=payment_key(operation_id)
        )

    if outcome.status is LegacyStatus.COMPLETED:
        result = {**outcome.document, "operationId": operation_id}
        result_ref = put_json(result, bucket=deps.bucket, key=result_path(operation_id), s3_client=deps.s3)
        plan = plan_transition(
            operation,
            Status.PAYMENT_COMPLETED,
            now=now,
            payment_ref=outcome.payment_ref,
            result_ref=result_ref,
        )
        completed = _event(
            PAYMENT_COMPLETED,
            operation,
            envelope,
            "payment-completed",
            claim_check=result_ref,
            ids={"paymentRef": outcome.payment_ref} if outcome.payment_ref else None,
        )
        _commit_step(deps, envelope, operation, plan, completed, done=PAYMENT_DONE)
        return

    if outcome.status is LegacyStatus.REJECTED:
        # A business outcome, not a poison message: recorded, announced, acknowledged -- not parked.
        _fail(
            deps,
            envelope,
            operation,
            "PaymentRejected",
            outcome.reason or "rejected by the legacy payment system",
        )
        return

    _schedule_check(envelope, ctx, deps, operation, now=now)


def _schedule_check(
    envelope: Envelope, ctx: RecordContext, deps: StepDeps, operation: Operation, *, now: datetime | None
) -> None:
    """ "Accepted, still processing": look again later with a delayed message, not a 15-minute wait."""
    moment = now or datetime.now(UTC)
    accepted_at = parse_iso(operation.payment_accepted_at) if operation.payment_accepted_at else moment
    age = (moment - accepted_at).total_seconds()
    if age > deps.settings.payment_max_age_seconds:
        _fail(
            deps,
            envelope,
            operation,
            "PaymentTimedOut",
            f"the legacy payment system was still processing {int(age)} s after accepting the payment "
            f"(maximum {deps.settings.payment_max_age_seconds} s); reconcile with the legacy system",
            now=now,
        )
        return
    attempt = _attempt(envelope) + 1
    delay = backoff_delay(
        attempt, base=float(deps.settings.payment_check_base_delay_seconds), cap=float(MAX_SQS_DELAY_SECONDS)
    )
    delay = min(delay, MAX_SQS_DELAY_SECONDS)
    check = _event(
        PAYMENT_STATUS_CHECK_DUE,
        operation,
        envelope,
        f"payment-check-{attempt}",
        payload={"attempt": attempt},
    )
    # Sent BEFORE the marker commits: a crash in between re-sends the same check (same eventId, so
    # the copy is acknowledged without effect), whereas the other order could lose the check chain.
    ctx.sqs_client.send_message(
        QueueUrl=ctx.queue_url,
        MessageBody=check.to_json(),
        DelaySeconds=delay,
        MessageAttributes={"eventType": {"DataType": "String", "StringValue": PAYMENT_STATUS_CHECK_DUE}},
    )
    _commit(
        deps,
        envelope,
        [
            deps.store.payment_accepted_write(
                operation.operation_id, now_iso(accepted_at), on_condition_failed=_accepted_stale(operation)
            )
        ],
        operation,
    )
    logger().info(
        "payment still processing; status check scheduled",
        extra={"operation_id": operation.operation_id, "attempt": attempt, "delay_seconds": delay},
    )


def _attempt(envelope: Envelope) -> int:
    """Which status check this delivery is (0 for the PaymentRequested itself)."""
    if envelope.event_type != PAYMENT_STATUS_CHECK_DUE:
        return 0
    value = (envelope.payload or {}).get("attempt")
    if not isinstance(value, int) or value < 1:
        raise InvalidInput(
            f"event {envelope.event_id} (PaymentStatusCheckDue) has no positive integer 'attempt'"
        )
    return value


def _accepted_stale(operation: Operation) -> Callable[[Mapping[str, Any] | None], Exception]:
    def explain(old: Mapping[str, Any] | None) -> Exception:
        status, _ = status_of(old)
        if status is not None and status in PAYMENT_DONE:
            return AlreadyApplied(f"operation {operation.operation_id} is already {status}")
        return IllegalTransition(f"operation {operation.operation_id} is {status}, not PAYMENT_PROCESSING")

    return explain


# -------------------------------------------------------------------------------------------------
# post-processing step
# -------------------------------------------------------------------------------------------------


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
def post_process(envelope: Envelope, ctx: RecordContext, deps: StepDeps, operation: Operation) -> None:
    """PaymentCompleted -> POST_PROCESSING -> invoice input in S3 -> INVOICE_PENDING + InvoiceRequested."""
    operation_id = operation.operation_id
    result_ref = envelope.claim_check or operation.result_ref
    if result_ref is None:
        raise InvalidInput(f"event {envelope.event_id} (PaymentCompleted) carries no result claim check")
    result = get_json(result_ref, s3_client=deps.s3)
    request = get_json(operation.request_ref, s3_client=deps.s3)

    if operation.status is Status.PAYMENT_COMPLETED:
        advanced = _advance(deps, operation, Status.POST_PROCESSING, POST_PROCESSING_DONE)
        if advanced is None:
            _skip(envelope, operation, "post-processing finished by a concurrent delivery")
            return
        operation = advanced

    ref = put_json(
        invoice_input(operation, request, result),
        bucket=deps.bucket,
        key=invoice_input_path(operation_id),
        s3_client=deps.s3,
    )
    plan = plan_transition(operation, Status.INVOICE_PENDING, invoice_input_ref=ref)
    requested = _event(INVOICE_REQUESTED, operation, envelope, "invoice-requested", claim_check=ref)
    _commit_step(deps, envelope, operation, plan, requested, done=POST_PROCESSING_DONE)


# -------------------------------------------------------------------------------------------------
# invoice step
# -------------------------------------------------------------------------------------------------


@runs(INVOICE_STEP)
def issue_invoice(envelope: Envelope, ctx: RecordContext, deps: StepDeps, operation: Operation) -> None:
    """InvoiceRequested -> invoice API (once) -> COMPLETED + OperationCompleted."""
    operation_id = operation.operation_id
    ref = envelope.claim_check or operation.invoice_input_ref
    if ref is None:
        raise InvalidInput(
            f"event {envelope.event_id} (InvoiceRequested) carries no invoice-input claim check"
        )
    document = get_json(ref, s3_client=deps.s3)
    issued = run_once(
        "invoice",
        downstream_key=invoice_key(operation_id),
        payload=document,
        call=lambda key: deps.invoices.issue(document, idempotency_key=key),
        table_name=deps.store.idempotency_table,
        ddb_client=deps.store.ddb,
    )
    invoice_id = str(issued["invoiceId"])
    plan = plan_transition(
        operation, Status.COMPLETED, ttl_days=deps.settings.terminal_ttl_days, invoice_id=invoice_id
    )
    completed = _event(
        OPERATION_COMPLETED,
        operation,
        envelope,
        "operation-completed",
        payload={"invoiceId": invoice_id, "paymentRef": operation.payment_ref},
    )
    _commit_step(deps, envelope, operation, plan, completed, done=INVOICE_DONE)
