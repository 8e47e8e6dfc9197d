"""The rules every payment step shares (``payments.payment_step``, ``payments.post_processing``,
``payments.invoice_step``): which events a step handles and where it is already done, how it starts
(the operation, or an acknowledgement without effect), and how it commits.

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

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from payments.operations import (
    UNSUCCESSFUL,
    AlreadyApplied,
    Operation,
    OperationError,
    Status,
    TransitionPlan,
    applied,
    plan_transition,
)
from payments.settings import Settings
from payments.subscriptions import (
    INVOICE_FAILED,
    INVOICE_REDRIVE_DUE,
    INVOICE_REQUESTED,
    PAYMENT_COMPLETED,
    PAYMENT_FAILED,
    PAYMENT_RECONCILIATION_DUE,
    PAYMENT_REDRIVE_DUE,
    PAYMENT_REQUESTED,
    PAYMENT_STATUS_CHECK_DUE,
    PAYMENT_UNRESOLVED,
    POST_PROCESSING_REDRIVE_DUE,
)
from relay import entity_events, steps
from relay.claim_check import Kept, keep_json
from relay.ddb import BusinessWrite
from relay.envelope import ClaimCheckRef, Envelope, new_envelope
from relay.errors import (
    PayloadConflict,
    TransientError,
)
from relay.observability import logger, record_metric
from relay.retry import RetryBudgetSpent
from relay.steps import StepRule

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


# Only an operation's own steps move it, one each: a stale write parks (``relay.steps.Stale``).
PAYMENT_STEP = StepRule(
    "payment step",
    (PAYMENT_REQUESTED, PAYMENT_STATUS_CHECK_DUE, PAYMENT_REDRIVE_DUE, PAYMENT_RECONCILIATION_DUE),
    "operationId",
    done=PAYMENT_DONE,
    runs_from=frozenset({Status.PENDING, Status.PAYMENT_PROCESSING, Status.RECONCILING}),
    stale="park",
)
POST_PROCESSING_STEP = StepRule(
    "post-processing",
    (PAYMENT_COMPLETED, POST_PROCESSING_REDRIVE_DUE),
    "operationId",
    done=POST_PROCESSING_DONE,
    runs_from=frozenset({Status.PAYMENT_COMPLETED, Status.POST_PROCESSING}),
    stale="park",
)
INVOICE_STEP = StepRule(
    "invoice step",
    (INVOICE_REQUESTED, INVOICE_REDRIVE_DUE),
    "operationId",
    done=INVOICE_DONE,
    runs_from=frozenset({Status.INVOICE_PENDING}),
    stale="park",
)
# What a sweeper's or a terminal write's failed condition means (no step's own rule): parked too.
LIFECYCLE = StepRule("lifecycle", (), "operationId", stale="park")
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
    @property
    def clock(self) -> steps.Clock: ...


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


class UnknownOperation(steps.UnknownEntity):
    """The event names an operation that does not exist (never created, or expired by TTL)."""

    ENTITY = "operation"


def runs(rule: StepRule) -> Callable[[StepBody], Step]:
    """A payment step's entry (``relay.steps.runs``): the operation its event names, or an
    acknowledgement without effect."""
    return steps.runs(rule, read=_read_operation, unknown=UnknownOperation)


def _read_operation(deps: StepDeps, operation_id: str) -> Operation | None:
    return deps.store.get_operation(operation_id)


type StepBody = Callable[[Envelope, RecordContext, StepDeps, Operation, datetime], None]
type Step = Callable[[Envelope, RecordContext, StepDeps], None]


def skip(envelope: Envelope, operation: Operation | None, why: str) -> None:
    steps.acknowledge(
        envelope,
        why,
        operation_id=operation.operation_id if operation else envelope.ids.get("operationId"),
        status=str(operation.status) if operation else None,
    )


def advance(
    deps: StepDeps, envelope: Envelope, operation: Operation, target: Status, rule: StepRule, *, now: datetime
) -> Operation | None:
    """Apply one transition WITHOUT a marker (the step's work is still ahead). Returns the operation
    as it is now, or None (``envelope`` acknowledged) if another delivery already finished the step.

    A plain conditional write (``apply_one``), not a one-item transaction: half the write units. A
    retry of it after its reply was lost finds ``target`` already applied, which the rule's
    ``on_stale`` explains as AlreadyApplied, and the fresh read below continues from there."""
    plan = plan_step(deps.settings, operation, target, now=now)
    done = rule.done
    concurrent = rule.runs_from - {operation.status, target}
    try:
        deps.store.apply_one(
            deps.store.transition_write(
                plan,
                on_condition_failed=rule.on_stale(plan, done | {target}, concurrent),
                operation=operation,
            )
        )
    except AlreadyApplied:
        current = deps.store.get_operation(operation.operation_id)
        if current is None or current.status in done:
            skip(envelope, current or operation, f"{rule.step} finished by a concurrent delivery")
            return None
        return current  # a concurrent delivery moved it to ``target``: continue from there
    return applied(operation, plan)


def commit(
    deps: LifecycleDeps,
    envelope: Envelope,
    write: BusinessWrite,
    operation: Operation,
) -> None:
    """ONE write of the operation that records ``envelope`` as processed (built with
    ``cause=envelope``); a failed condition is explained by the write's own ``on_condition_failed``,
    which ``seen_first`` makes read a duplicate as one (``relay.steps.commit``)."""
    context = {"operation_id": operation.operation_id, "status": str(operation.status)}
    if not steps.commit(lambda: deps.store.apply_one(write), envelope, **context):
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


def commit_step(
    deps: StepDeps,
    envelope: Envelope,
    operation: Operation,
    plan: TransitionPlan,
    event: Envelope,
    rule: StepRule,
    *,
    result: Kept | None = None,
    result_consumed: bool = False,
) -> None:
    """A step's outcome: the transition, the processed eventId and the next event, in ONE conditional
    UpdateItem (a failed condition is explained by ``seen_first`` and the ``rule``'s ``on_stale``)."""
    write = deps.store.transition_write(
        plan,
        on_condition_failed=seen_first(envelope, rule.on_stale(plan)),
        cause=envelope,
        events=(event,),
        operation=operation,
        result=result,
        result_consumed=result_consumed,
    )
    commit(deps, envelope, write, operation)


def step_event(
    event_type: str,
    operation: Operation,
    cause: Envelope,
    step: str,
    *,
    now: datetime,
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
        occurred_at=now,
    )


def plan_step(
    settings: Settings,
    operation: Operation,
    target: Status,
    *,
    now: datetime,
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
    now: datetime,
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
    ended = step_event(event_type, operation, envelope, label, now=now, payload=payload)
    done = PAYMENT_DONE if target is not Status.INVOICE_FAILED else INVOICE_DONE | POST_PROCESSING_DONE
    stale = LIFECYCLE.on_stale(plan, done)
    write = deps.store.transition_write(
        plan,
        on_condition_failed=seen_first(envelope, stale) if marker else stale,
        cause=envelope if marker else None,
        events=(ended,),
        operation=operation,
    )
    if marker:
        commit(deps, envelope, write, operation)
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


def fail(
    deps: StepDeps,
    envelope: Envelope,
    operation: Operation,
    code: str,
    message: str,
    *,
    now: datetime,
) -> None:
    end_unsuccessfully(deps, envelope, operation, Status.FAILED, code, message, now=now)


def retry_later(
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


def keep(deps: StepDeps, document: Mapping[str, Any], key: str) -> Kept:
    """A step's document (the payment result, the invoice input) inline, or above the claim-check
    threshold in S3 under ``key`` -- fixed, so a retry after a crash writes the same bytes again."""
    return keep_json(
        document,
        threshold_bytes=deps.settings.claim_check_threshold_bytes,
        bucket=deps.bucket,
        key=key,
        s3_client=deps.s3,
    )


def result_path(operation_id: str) -> str:
    return f"payments/{operation_id}/result.json"


def invoice_input_path(operation_id: str) -> str:
    return f"payments/{operation_id}/invoice-input.json"
