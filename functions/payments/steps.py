"""The consumers' domain: the payment, post-processing and invoice steps of an operation.

Every step follows the same rules (the seed notes' four failure windows):

* a delivery the operation already recorded (``seen``), or whose operation is already past the step,
  is acknowledged without effect (a duplicate or a late redelivery); the same eventId with another
  payload is a PayloadConflict;
* the state change, the processed eventId and the next event commit in ONE conditional UpdateItem of
  the operation (``relay.entity_events``), conditional on the state and version that were read -- so
  a crash after the write and before the acknowledgement only causes a redelivery that changes
  nothing, and the stream publishes the event from the item;
* the result and the invoice input travel inline; only above the claim-check threshold are they
  written to S3, under a fixed key, so a retry after a crash overwrites it with the same bytes;
* external calls carry a stable downstream idempotency key (``{operationId}:payment``,
  ``{operationId}:invoice``), so a retry after a lost reply charges or invoices nothing more.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Concatenate, Protocol

from payments.invoices import InvoiceRefused, invoice_key
from payments.legacy import LegacyOutcome, LegacyStatus, payment_key
from payments.operations import (
    UNSUCCESSFUL,
    AlreadyApplied,
    IllegalTransition,
    Operation,
    OperationError,
    Status,
    TransitionPlan,
    applied,
    now_iso,
    parse_iso,
    plan_transition,
)
from payments.settings import MAX_SQS_DELAY_SECONDS, Settings
from payments.store import result_of, result_to_store, status_of
from payments.subscriptions import (
    INVOICE_FAILED,
    INVOICE_REDRIVE_DUE,
    INVOICE_REQUESTED,
    OPERATION_COMPLETED,
    PAYMENT_COMPLETED,
    PAYMENT_FAILED,
    PAYMENT_RECONCILIATION_DUE,
    PAYMENT_REDRIVE_DUE,
    PAYMENT_REQUESTED,
    PAYMENT_STATUS_CHECK_DUE,
    PAYMENT_UNRESOLVED,
    POST_PROCESSING_REDRIVE_DUE,
)
from relay import entity_events
from relay.backoff import backoff_delay
from relay.claim_check import Kept, canonical_bytes, get_json, keep_json, load_json
from relay.envelope import ClaimCheckRef, Envelope, new_envelope
from relay.errors import (
    ClaimCheckMismatch,
    DependencyUnavailable,
    InvalidInput,
    OutcomeUnknown,
    PayloadConflict,
    PermanentError,
    TransientError,
)
from relay.idempotency import BusinessWrite, CommitResult
from relay.observability import logger, record_metric
from relay.retry import RetryBudgetSpent
from relay.state_machine import explain_stale, state_of

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from payments.invoices import InvoiceApiClient
    from payments.legacy import LegacyPaymentsClient
    from payments.store import OperationStore
    from relay.consumer import RecordContext


# States in which a step's work is already done (its outcome committed, or the operation ended).
PAYMENT_DONE = frozenset(
    {
        Status.PAYMENT_COMPLETED,
        Status.POST_PROCESSING,
        Status.INVOICE_PENDING,
        Status.COMPLETED,
        Status.FAILED,
        Status.PAYMENT_UNRESOLVED,
        Status.INVOICE_FAILED,
        # Cancelled before submission: the payment step must never run (the worker's conditional
        # PENDING -> PAYMENT_PROCESSING fails, re-reads CANCELLED, and acknowledges without a charge).
        Status.CANCELLED,
    }
)
POST_PROCESSING_DONE = frozenset({Status.INVOICE_PENDING, Status.COMPLETED, Status.INVOICE_FAILED})
INVOICE_DONE = frozenset({Status.COMPLETED, Status.INVOICE_FAILED})


@dataclasses.dataclass(frozen=True)
class StepRule:
    """Which events a step handles, where it is already done, and which states it runs from."""

    event_types: tuple[str, ...]
    step: str
    done: frozenset[Status]
    runs_from: frozenset[Status]


PAYMENT_STEP = StepRule(
    (PAYMENT_REQUESTED, PAYMENT_STATUS_CHECK_DUE, PAYMENT_REDRIVE_DUE, PAYMENT_RECONCILIATION_DUE),
    "payment step",
    PAYMENT_DONE,
    frozenset({Status.PENDING, Status.PAYMENT_PROCESSING, Status.RECONCILING}),
)
POST_PROCESSING_STEP = StepRule(
    (PAYMENT_COMPLETED, POST_PROCESSING_REDRIVE_DUE),
    "post-processing",
    POST_PROCESSING_DONE,
    frozenset({Status.PAYMENT_COMPLETED, Status.POST_PROCESSING}),
)
INVOICE_STEP = StepRule(
    (INVOICE_REQUESTED, INVOICE_REDRIVE_DUE),
    "invoice step",
    INVOICE_DONE,
    frozenset({Status.INVOICE_PENDING}),
)
# The sweeper's re-drive event of the step each non-terminal state waits on.
REDRIVE_EVENT: dict[Status, str] = {
    Status.PENDING: PAYMENT_REDRIVE_DUE,
    Status.PAYMENT_PROCESSING: PAYMENT_REDRIVE_DUE,
    Status.RECONCILING: PAYMENT_RECONCILIATION_DUE,
    Status.PAYMENT_COMPLETED: POST_PROCESSING_REDRIVE_DUE,
    Status.POST_PROCESSING: POST_PROCESSING_REDRIVE_DUE,
    Status.INVOICE_PENDING: INVOICE_REDRIVE_DUE,
}


class LifecycleDeps(Protocol):
    """What moving an operation through its lifecycle needs: the settings and the store."""

    @property
    def settings(self) -> Settings: ...
    @property
    def store(self) -> OperationStore: ...


class StepDeps(LifecycleDeps, Protocol):
    """What the steps use (``payments.wiring.Wiring`` provides it; tests may pass their own): the
    lifecycle's, S3 and the claim-check bucket, the legacy system and the invoice API."""

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
    operation = _load(deps, operation_id, envelope)
    if entity_events.seen({entity_events.SEEN_ATTRIBUTE: operation.seen}, envelope) or (
        operation.legacy and deps.store.already_processed(envelope)
    ):
        _skip(envelope, operation, "event already processed")
        return None
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
    plan: TransitionPlan, done: frozenset[Status], concurrent: frozenset[Status] = frozenset()
) -> Callable[[Mapping[str, Any] | None], Exception]:
    """A failed transition condition (``relay.state_machine.explain_stale``): only the operation's
    own consumers move it, one step each, so a state other than the one read (and not ``done``) means
    the step cannot apply: IllegalTransition, parked with the reason, never applied. Except a state
    of ``concurrent``: one this same step runs from, where a concurrent delivery of the step took it
    (two copies of one PaymentRequested: one moved PENDING -> PAYMENT_PROCESSING -> RECONCILING while
    the other still read PENDING). That is transient: the retry reads it again and carries on from
    there, or acknowledges."""
    explain = explain_stale(plan, done, elsewhere="illegal")
    if not concurrent:
        return explain

    def explain_or_retry(old: Mapping[str, Any] | None) -> Exception:
        status, version = state_of(old)
        if status is not None and status in concurrent and status not in done:
            return DependencyUnavailable(
                f"{plan.label} moved to {status} v{version} by a concurrent delivery of this step (read "
                f"{plan.source} v{plan.expected_version}); retrying with a fresh read."
            )
        return explain(old)

    return explain_or_retry


def _advance(deps: StepDeps, operation: Operation, target: Status, rule: StepRule) -> Operation | None:
    """Apply one transition WITHOUT a marker (the step's work is still ahead). Returns the operation
    as it is now, or None if another delivery already finished the step.

    A plain conditional write (``apply_one``), not a one-item transaction: half the write units. A
    retry of it after its reply was lost finds ``target`` already applied, which ``on_stale`` explains
    as AlreadyApplied, and the fresh read below continues from there."""
    plan = plan_step(deps.settings, operation, target)
    done = rule.done
    concurrent = rule.runs_from - {operation.status, target}
    try:
        deps.store.apply_one(
            deps.store.transition_write(
                plan,
                on_condition_failed=on_stale(plan, done | {target}, concurrent),
                legacy=operation.legacy,
            )
        )
    except AlreadyApplied:
        current = deps.store.get_operation(operation.operation_id)
        if current is None or current.status in done:
            return None
        return current  # a concurrent delivery moved it to ``target``: continue from there
    # An operation of the layout before is converted by this first write (``seen``, the ``due`` index).
    return applied(operation, plan, legacy=False)


def _commit(
    deps: LifecycleDeps,
    envelope: Envelope,
    write: BusinessWrite,
    operation: Operation,
    *,
    marker: bool = False,
) -> None:
    """ONE write of the operation that records ``envelope`` as processed (built with
    ``cause=envelope``); a failed condition is explained by the write's own ``on_condition_failed``,
    which ``seen_first`` makes read a duplicate as one. ``marker``: an operation of the layout before,
    whose non-transition write commits with the old processed-event marker instead."""
    try:
        if marker:
            if deps.store.commit_once(envelope, [write]) is CommitResult.DUPLICATE:
                return  # counted and logged by the kernel
        else:
            deps.store.apply_one(write)
    except AlreadyApplied as exc:
        _skip(envelope, operation, str(exc))
        return
    logger().info(
        "step committed", extra={"operation_id": operation.operation_id, "event_type": envelope.event_type}
    )


def seen_first(
    envelope: Envelope, explain: Callable[[Mapping[str, Any] | None], Exception]
) -> Callable[[Mapping[str, Any] | None], Exception]:
    """A failed condition of a write that records ``envelope``: the operation as it was (ALL_OLD)
    already holds the eventId -> a duplicate (or, with another payload, a PayloadConflict), learned
    without a second read; anything else is ``explain``'s."""

    def explain_seen(old: Mapping[str, Any] | None) -> Exception:
        try:
            if entity_events.seen(old, envelope):
                return AlreadyApplied(f"event {envelope.event_id} already processed")
        except PayloadConflict as conflict:
            return conflict
        return explain(old)

    return explain_seen


def _commit_step(
    deps: StepDeps,
    envelope: Envelope,
    operation: Operation,
    plan: TransitionPlan,
    event: Envelope,
    *,
    done: frozenset[Status],
    result: Kept | None = None,
    result_consumed: bool = False,
) -> None:
    """A step's outcome: the transition, the processed eventId and the next event, in ONE conditional
    UpdateItem (a failed condition is explained by ``seen_first`` and ``on_stale`` against ``done``)."""
    write = deps.store.transition_write(
        plan,
        on_condition_failed=seen_first(envelope, on_stale(plan, done)),
        cause=envelope,
        events=(event,),
        legacy=operation.legacy,
        result=result,
        result_consumed=result_consumed,
    )
    _commit(deps, envelope, write, operation)


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


def plan_step(
    settings: Settings,
    operation: Operation,
    target: Status,
    *,
    now: datetime | None = None,
    error: OperationError | None = None,
    **attributes: Any,
) -> TransitionPlan:
    """``plan_transition`` with the stage's lifecycle: a terminal state's retention (longer for the
    unsuccessful ones), a non-terminal state's deadline."""
    ttl = settings.failed_ttl_days if target in UNSUCCESSFUL else settings.terminal_ttl_days
    return plan_transition(
        operation, target, now=now, error=error, ttl_days=ttl, deadlines=settings.deadlines, **attributes
    )


def end_unsuccessfully(
    deps: LifecycleDeps,
    envelope: Envelope,
    operation: Operation,
    target: Status,
    code: str,
    message: str,
    *,
    now: datetime | None = None,
    marker: bool = True,
) -> None:
    """Move the operation to an unsuccessful terminal state (FAILED, PAYMENT_UNRESOLVED,
    INVOICE_FAILED) with the reason, and announce it (PaymentFailed lets orders release the stock;
    the other two are facts for operators): transition + outbox row (+ the marker of ``envelope``)."""
    event_type, label = {
        Status.FAILED: (PAYMENT_FAILED, "payment-failed"),
        Status.PAYMENT_UNRESOLVED: (PAYMENT_UNRESOLVED, "payment-unresolved"),
        Status.INVOICE_FAILED: (INVOICE_FAILED, "invoice-failed"),
    }[target]
    plan = plan_step(deps.settings, operation, target, now=now, error=OperationError(code, message))
    payload: dict[str, Any] = {"code": code, "reason": message}
    if operation.payment_ref:
        payload["paymentRef"] = operation.payment_ref
    ended = _event(event_type, operation, envelope, label, payload=payload)
    done = PAYMENT_DONE if target is not Status.INVOICE_FAILED else INVOICE_DONE | POST_PROCESSING_DONE
    write = deps.store.transition_write(
        plan,
        on_condition_failed=seen_first(envelope, on_stale(plan, done)) if marker else on_stale(plan, done),
        cause=envelope if marker else None,
        events=(ended,),
        legacy=operation.legacy,
    )
    if marker:
        _commit(deps, envelope, write, operation)
    else:
        deps.store.apply_one(write)
    record_metric(_ENDING_METRIC[target], event_type=envelope.event_type)
    logger().warning(
        "operation ended unsuccessfully",
        extra={
            "operation_id": operation.operation_id,
            "status": str(target),
            "code": code,
            "reason": message,
        },
    )


# One kernel metric per unsuccessful ending; the stack alarms on the two that need a human.
_ENDING_METRIC = {
    Status.FAILED: "PaymentFailed",
    Status.PAYMENT_UNRESOLVED: "PaymentUnresolved",
    Status.INVOICE_FAILED: "InvoiceFailed",
}


def _fail(
    deps: StepDeps,
    envelope: Envelope,
    operation: Operation,
    code: str,
    message: str,
    *,
    now: datetime | None = None,
) -> None:
    end_unsuccessfully(deps, envelope, operation, Status.FAILED, code, message, now=now)


def _retry_later(
    deps: StepDeps, ctx: RecordContext, operation: Operation, error: TransientError
) -> RetryBudgetSpent | None:
    """A transient failure of the step's partner: record on the operation when the kernel will try
    again (so the sweeper leaves it alone) and let the error go on to the kernel, which re-sends the
    message with that very delay. Returns the RetryBudgetSpent instead when the step's time budget
    is over (the caller decides the ending)."""
    try:
        plan = ctx.plan_retry(error)
    except RetryBudgetSpent as spent:
        return spent
    try:
        deps.store.apply_one(
            deps.store.retry_write(
                operation,
                next_attempt_at=plan.next_attempt_at,
                error=str(error),
                on_condition_failed=lambda _old: AlreadyApplied("the operation moved on"),
            )
        )
    except AlreadyApplied:
        pass  # moved on meanwhile: the retry will see where it is
    return None


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
    """The payment step. PENDING / PAYMENT_PROCESSING: submit to the legacy system (create-or-get under
    ``{operationId}:payment``) -> PAYMENT_COMPLETED, FAILED (rejected), a delayed status check, a
    retry within the step's time budget, or RECONCILING when the outcome is unknown. RECONCILING:
    ask the legacy system by the key -> PAYMENT_COMPLETED, FAILED (nothing charged), another check,
    or PAYMENT_UNRESOLVED once the reconciliation budget is spent."""
    operation_id = operation.operation_id

    # Read (and verify) the claim check BEFORE changing state: a tampered request is parked while
    # the operation still shows where it stopped.
    request = load_json(operation.request, deps.s3, what="request")
    if operation.status is Status.RECONCILING:
        _reconcile(envelope, ctx, deps, operation, request, now=now)
        return
    if operation.status is Status.PENDING:
        advanced = _advance(deps, operation, Status.PAYMENT_PROCESSING, PAYMENT_STEP)
        if advanced is None:
            _skip(envelope, operation, "payment step finished by a concurrent delivery")
            return
        operation = advanced

    try:
        # The call may take long: keep the message invisible meanwhile, so no second consumer starts it.
        with ctx.heartbeat():
            outcome = deps.legacy.submit(
                legacy_request(operation, request), idempotency_key=payment_key(operation_id)
            )
    except OutcomeUnknown as exc:
        # The request may have reached the legacy system and charged: never retry blind, ask.
        _start_reconciling(envelope, ctx, deps, operation, "PaymentOutcomeUnknown", str(exc), now=now)
        return
    except TransientError as exc:
        spent = _retry_later(deps, ctx, operation, exc)
        if spent is None:
            raise
        _start_reconciling(envelope, ctx, deps, operation, "PaymentRetryBudgetSpent", str(spent), now=now)
        return

    if outcome.status is LegacyStatus.COMPLETED:
        _payment_completed(deps, envelope, operation, outcome, now=now)
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


def _payment_completed(
    deps: StepDeps, envelope: Envelope, operation: Operation, outcome: LegacyOutcome, *, now: datetime | None
) -> None:
    operation_id = operation.operation_id
    result = keep_json(
        result_to_store(outcome.document),
        threshold_bytes=deps.settings.claim_check_threshold_bytes,
        bucket=deps.bucket,
        key=result_path(operation_id),
        s3_client=deps.s3,
    )
    plan = plan_step(
        deps.settings, operation, Status.PAYMENT_COMPLETED, now=now, payment_ref=outcome.payment_ref
    )
    completed = _event(
        PAYMENT_COMPLETED,
        operation,
        envelope,
        "payment-completed",
        payload={},
        ids={"paymentRef": outcome.payment_ref} if outcome.payment_ref else None,
    )
    _commit_step(deps, envelope, operation, plan, completed, done=PAYMENT_DONE, result=result)


def _send_to_self(ctx: RecordContext, event: Envelope, delay: int) -> None:
    # Sent BEFORE the marker commits: a crash in between re-sends the same event (same eventId, so the
    # copy is acknowledged without effect), whereas the other order could lose the chain.
    ctx.sqs_client.send_message(
        QueueUrl=ctx.queue_url,
        MessageBody=event.to_json(),
        DelaySeconds=delay,
        MessageAttributes={"eventType": {"DataType": "String", "StringValue": event.event_type}},
    )


def _send_check(
    ctx: RecordContext,
    operation: Operation,
    cause: Envelope,
    event_type: str,
    label: str,
    attempt: int,
    delay: int,
) -> datetime:
    """Send the ``attempt``-th delayed check of a chain (status or reconciliation); returns when it is due."""
    check = _event(event_type, operation, cause, f"{label}-{attempt}", payload={"attempt": attempt})
    _send_to_self(ctx, check, delay)
    return datetime.now(UTC) + timedelta(seconds=delay)


def _check_delay(deps: StepDeps, attempt: int) -> int:
    delay = backoff_delay(
        attempt, base=float(deps.settings.payment_check_base_delay_seconds), cap=float(MAX_SQS_DELAY_SECONDS)
    )
    return min(delay, MAX_SQS_DELAY_SECONDS)


def _schedule_check(
    envelope: Envelope, ctx: RecordContext, deps: StepDeps, operation: Operation, *, now: datetime | None
) -> None:
    """ "Accepted, still processing": look again later with a delayed message, not a 15-minute wait.
    Past the maximum age of a pending payment the outcome counts as unknown: RECONCILING."""
    moment = now or datetime.now(UTC)
    accepted_at = parse_iso(operation.payment_accepted_at) if operation.payment_accepted_at else moment
    age = (moment - accepted_at).total_seconds()
    if age > deps.settings.payment_max_age_seconds:
        _start_reconciling(
            envelope,
            ctx,
            deps,
            operation,
            "PaymentStillProcessing",
            f"the legacy payment system was still processing {int(age)} s after accepting the payment "
            f"(maximum {deps.settings.payment_max_age_seconds} s)",
            now=now,
        )
        return
    attempt = _attempt(envelope) + 1
    delay = _check_delay(deps, attempt)
    next_at = _send_check(ctx, operation, envelope, PAYMENT_STATUS_CHECK_DUE, "payment-check", attempt, delay)
    _commit(
        deps,
        envelope,
        deps.store.payment_accepted_write(
            operation.operation_id,
            now_iso(accepted_at),
            next_attempt_at=next_at,
            cause=None if operation.legacy else envelope,
            on_condition_failed=seen_first(envelope, _accepted_stale(operation)),
        ),
        operation,
        marker=operation.legacy,
    )
    logger().info(
        "payment still processing; status check scheduled",
        extra={"operation_id": operation.operation_id, "attempt": attempt, "delay_seconds": delay},
    )


def _reconciliation_check(
    ctx: RecordContext, deps: StepDeps, operation: Operation, cause: Envelope, attempt: int
) -> tuple[int, datetime]:
    """Send the ``attempt``-th delayed PaymentReconciliationDue; returns (delay, when)."""
    # Never sooner than the legacy client's timeout: a call that timed out has landed by then.
    delay = max(_check_delay(deps, attempt), min(int(deps.settings.legacy_timeout_seconds) + 1, 900))
    return delay, _send_check(
        ctx, operation, cause, PAYMENT_RECONCILIATION_DUE, "reconciliation", attempt, delay
    )


def _start_reconciling(
    envelope: Envelope,
    ctx: RecordContext,
    deps: StepDeps,
    operation: Operation,
    code: str,
    reason: str,
    *,
    now: datetime | None,
) -> None:
    """The payment's outcome is unknown: RECONCILING, and the first reconciliation check scheduled.
    The operation is never FAILED on an unknown outcome -- money may have moved."""
    if operation.status is Status.RECONCILING:
        return
    _, next_at = _reconciliation_check(ctx, deps, operation, envelope, 1)
    plan = plan_step(
        deps.settings,
        operation,
        Status.RECONCILING,
        now=now,
        reconcile_reason=f"{code}: {reason}",
        next_attempt_at=next_at,
    )
    _commit(
        deps,
        envelope,
        deps.store.transition_write(
            plan,
            on_condition_failed=seen_first(envelope, on_stale(plan, PAYMENT_DONE)),
            cause=envelope,
            legacy=operation.legacy,
        ),
        operation,
    )
    record_metric("PaymentReconciling", event_type=envelope.event_type)
    logger().warning(
        "payment outcome unknown; reconciling",
        extra={"operation_id": operation.operation_id, "code": code, "reason": reason},
    )


def _reconcile(
    envelope: Envelope,
    ctx: RecordContext,
    deps: StepDeps,
    operation: Operation,
    request: Mapping[str, Any],
    *,
    now: datetime | None,
) -> None:
    """Ask the legacy system what happened under ``{operationId}:payment`` -- a read, never a charge."""
    key = payment_key(operation.operation_id)
    unknown: str
    try:
        with ctx.heartbeat():
            found = deps.legacy.lookup(key)
    except TransientError as exc:
        found, unknown = None, f"the legacy lookup failed ({exc})"
    else:
        if found is None:
            _fail(
                deps,
                envelope,
                operation,
                "PaymentNotCharged",
                f"the legacy payment system has no payment under key {key}: nothing was charged. "
                "The client may request the payment again.",
                now=now,
            )
            return
        if found.status is LegacyStatus.COMPLETED:
            _payment_completed(deps, envelope, operation, found, now=now)
            return
        if found.status is LegacyStatus.REJECTED:
            _fail(deps, envelope, operation, "PaymentRejected", found.reason or "rejected", now=now)
            return
        unknown = "the legacy payment system still reports PROCESSING"
    moment = now or datetime.now(UTC)
    spent = (moment - operation.since).total_seconds()
    if spent >= deps.settings.reconcile_budget_seconds:
        end_unsuccessfully(
            deps,
            envelope,
            operation,
            Status.PAYMENT_UNRESOLVED,
            "PaymentUnresolved",
            f"reconciliation of key {key} found no outcome in {int(spent)} s (budget "
            f"{deps.settings.reconcile_budget_seconds} s): {unknown}. Reconcile by hand with the legacy "
            "system; nothing was retried or refunded.",
            now=now,
        )
        return
    attempt = _attempt(envelope) + 1
    delay, next_at = _reconciliation_check(ctx, deps, operation, envelope, attempt)
    _commit(
        deps,
        envelope,
        deps.store.retry_write(
            operation,
            next_attempt_at=next_at,
            error=unknown,
            cause=None if operation.legacy else envelope,
            on_condition_failed=seen_first(envelope, _accepted_stale(operation, Status.RECONCILING)),
        ),
        operation,
        marker=operation.legacy,
    )
    logger().info(
        "payment still unknown; reconciliation check scheduled",
        extra={"operation_id": operation.operation_id, "attempt": attempt, "delay_seconds": delay},
    )


def _attempt(envelope: Envelope) -> int:
    """Which check of a chain this delivery is (0 for any event that does not start from a chain)."""
    if envelope.event_type not in (PAYMENT_STATUS_CHECK_DUE, PAYMENT_RECONCILIATION_DUE):
        return 0
    value = (envelope.payload or {}).get("attempt")
    if not isinstance(value, int) or value < 1:
        raise InvalidInput(
            f"event {envelope.event_id} ({envelope.event_type}) has no positive integer 'attempt'"
        )
    return value


def _accepted_stale(
    operation: Operation, expected: Status = Status.PAYMENT_PROCESSING
) -> Callable[[Mapping[str, Any] | None], Exception]:
    def explain(old: Mapping[str, Any] | None) -> Exception:
        status, _ = status_of(old)
        if status is not None and status in PAYMENT_DONE:
            return AlreadyApplied(f"operation {operation.operation_id} is already {status}")
        return IllegalTransition(f"operation {operation.operation_id} is {status}, not {expected}")

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
        advanced = _advance(deps, operation, Status.POST_PROCESSING, POST_PROCESSING_STEP)
        if advanced is None:
            _skip(envelope, operation, "post-processing finished by a concurrent delivery")
            return
        operation = advanced

    kept = keep_json(
        invoice_input(operation, request, result),
        threshold_bytes=deps.settings.claim_check_threshold_bytes,
        bucket=deps.bucket,
        key=invoice_input_path(operation_id),
        s3_client=deps.s3,
    )
    plan = plan_step(deps.settings, operation, Status.INVOICE_PENDING)
    # The invoice input derives from the request and the payment reference, both in the operation:
    # the event carries its sha256 (the invoice worker rebuilds it and must get the same bytes), or
    # its claim check when it is large.
    requested = _event(
        INVOICE_REQUESTED,
        operation,
        envelope,
        "invoice-requested",
        payload={"invoiceInputSha256": kept.sha256} if kept.ref is None else None,
        claim_check=kept.ref,
    )
    _commit_step(deps, envelope, operation, plan, requested, done=POST_PROCESSING_DONE, result_consumed=True)


# -------------------------------------------------------------------------------------------------
# invoice step
# -------------------------------------------------------------------------------------------------


@runs(INVOICE_STEP)
def issue_invoice(envelope: Envelope, ctx: RecordContext, deps: StepDeps, operation: Operation) -> None:
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
        )
        return
    except TransientError as exc:
        spent = _retry_later(deps, ctx, operation, exc)
        if spent is None:
            raise
        end_unsuccessfully(
            deps, envelope, operation, Status.INVOICE_FAILED, "InvoiceRetryBudgetSpent", f"{spent}; {charged}"
        )
        return
    invoice_id = str(issued["invoiceId"])
    plan = plan_step(deps.settings, operation, Status.COMPLETED, invoice_id=invoice_id)
    completed = _event(
        OPERATION_COMPLETED,
        operation,
        envelope,
        "operation-completed",
        payload={"invoiceId": invoice_id, "paymentRef": operation.payment_ref},
    )
    _commit_step(deps, envelope, operation, plan, completed, done=INVOICE_DONE)


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
        raise InvalidInput(f"event {envelope.event_id} (InvoiceRequested) carries no invoice input")
    stored: Mapping[str, Any] = get_json(ref, s3_client=deps.s3)
    return stored
