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

import dataclasses
import functools
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from payments.operations import (
    UNSUCCESSFUL,
    AlreadyApplied,
    IllegalTransition,
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
from relay.claim_check import Kept
from relay.ddb import BusinessWrite
from relay.envelope import ClaimCheckRef, Envelope, new_envelope
from relay.errors import (
    ConcurrentWrite,
    PayloadConflict,
    TransientError,
)
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


# -------------------------------------------------------------------------------------------------
# shared rules
# -------------------------------------------------------------------------------------------------


type StepBody = Callable[[Envelope, RecordContext, StepDeps, Operation, datetime], None]
type Step = Callable[[Envelope, RecordContext, StepDeps], None]


def runs(rule: StepRule) -> Callable[[StepBody], Step]:
    """A step's entry: ``_begin`` decides whether (and on which operation) the body runs, and the body
    gets the moment it runs at, read once from ``deps.clock``."""

    def wrap(body: StepBody) -> Step:
        @functools.wraps(body)
        def step(envelope: Envelope, ctx: RecordContext, deps: StepDeps, /) -> None:
            operation = _begin(envelope, deps, rule)
            if operation is not None:
                body(envelope, ctx, deps, operation, deps.clock())

        return step

    return wrap


def _begin(envelope: Envelope, deps: StepDeps, rule: StepRule) -> Operation | None:
    """How every step starts: the operation the event names, or None when the delivery is
    acknowledged without effect (already processed, or the step is already done). An operation in a
    state the step cannot run from is an IllegalTransition: parked with the reason."""
    step, done, runs_from = rule.step, rule.done, rule.runs_from
    operation_id = steps.expect(
        envelope,
        *rule.event_types,
        entity_id="operationId",
        consumer="this consumer",
        routed_by="subscription's filter policy",
    )
    operation = steps.load(deps.store.get_operation, operation_id, envelope, unknown=UnknownOperation)
    if entity_events.seen({entity_events.SEEN_ATTRIBUTE: operation.seen}, envelope):
        skip(envelope, operation, "event already processed")
        return None
    if operation.status in done:
        skip(envelope, operation, f"{step} already done")
        return None
    if operation.status not in runs_from:
        raise IllegalTransition(
            f"operation {operation_id} is {operation.status}; {envelope.event_type} expects "
            f"{' or '.join(sorted(runs_from))}, the {step} cannot run. Not applied."
        )
    return operation


def skip(envelope: Envelope, operation: Operation | None, why: str) -> None:
    steps.acknowledge(
        envelope,
        why,
        operation_id=operation.operation_id if operation else envelope.ids.get("operationId"),
        status=str(operation.status) if operation else None,
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
            return ConcurrentWrite(
                f"{plan.label} moved to {status} v{version} by a concurrent delivery of this step (read "
                f"{plan.source} v{plan.expected_version}); retrying with a fresh read."
            )
        return explain(old)

    return explain_or_retry


def advance(
    deps: StepDeps, operation: Operation, target: Status, rule: StepRule, *, now: datetime
) -> Operation | None:
    """Apply one transition WITHOUT a marker (the step's work is still ahead). Returns the operation
    as it is now, or None if another delivery already finished the step.

    A plain conditional write (``apply_one``), not a one-item transaction: half the write units. A
    retry of it after its reply was lost finds ``target`` already applied, which ``on_stale`` explains
    as AlreadyApplied, and the fresh read below continues from there."""
    plan = plan_step(deps.settings, operation, target, now=now)
    done = rule.done
    concurrent = rule.runs_from - {operation.status, target}
    try:
        deps.store.apply_one(
            deps.store.transition_write(
                plan,
                on_condition_failed=on_stale(plan, done | {target}, concurrent),
                operation=operation,
            )
        )
    except AlreadyApplied:
        current = deps.store.get_operation(operation.operation_id)
        if current is None or current.status in done:
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
    which ``seen_first`` makes read a duplicate as one."""
    try:
        deps.store.apply_one(write)
    except AlreadyApplied as exc:
        skip(envelope, operation, str(exc))
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
    write = deps.store.transition_write(
        plan,
        on_condition_failed=seen_first(envelope, on_stale(plan, done)) if marker else on_stale(plan, done),
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


def result_path(operation_id: str) -> str:
    return f"payments/{operation_id}/result.json"


def invoice_input_path(operation_id: str) -> str:
    return f"payments/{operation_id}/invoice-input.json"
