"""The payment step: PaymentRequested (and its status checks, re-drives and reconciliation) -> the
legacy payment system, once, under ``{operationId}:payment``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from payments.legacy import LegacyOutcome, LegacyStatus, payment_key
from payments.operations import (
    AlreadyApplied,
    IllegalTransition,
    Operation,
    Status,
    now_iso,
    parse_iso,
)
from payments.settings import MAX_SQS_DELAY_SECONDS
from payments.step_rules import (
    PAYMENT_DONE,
    PAYMENT_STEP,
    StepDeps,
    advance,
    commit,
    commit_step,
    end_unsuccessfully,
    fail,
    keep,
    plan_step,
    result_path,
    retry_later,
    runs,
    seen_first,
    step_event,
)
from payments.store import result_to_store, status_of
from payments.subscriptions import (
    PAYMENT_COMPLETED,
    PAYMENT_RECONCILIATION_DUE,
    PAYMENT_STATUS_CHECK_DUE,
)
from relay.backoff import backoff_delay
from relay.claim_check import load_json
from relay.envelope import Envelope
from relay.errors import (
    InvalidInput,
    OutcomeUnknown,
    TransientError,
)
from relay.observability import logger, record_metric

if TYPE_CHECKING:
    from relay.consumer import RecordContext


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
    now: datetime,
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
        if (
            advanced := advance(deps, envelope, operation, Status.PAYMENT_PROCESSING, PAYMENT_STEP, now=now)
        ) is None:
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
        spent = retry_later(deps, ctx, operation, exc)
        if spent is None:
            raise
        _start_reconciling(envelope, ctx, deps, operation, "PaymentRetryBudgetSpent", str(spent), now=now)
        return

    if outcome.status is LegacyStatus.COMPLETED:
        _payment_completed(deps, envelope, operation, outcome, now=now)
        return

    if outcome.status is LegacyStatus.REJECTED:
        # A business outcome, not a poison message: recorded, announced, acknowledged -- not parked.
        fail(
            deps,
            envelope,
            operation,
            "PaymentRejected",
            outcome.reason or "rejected by the legacy payment system",
            now=now,
        )
        return

    _schedule_check(envelope, ctx, deps, operation, now=now)


def _payment_completed(
    deps: StepDeps, envelope: Envelope, operation: Operation, outcome: LegacyOutcome, *, now: datetime
) -> None:
    operation_id = operation.operation_id
    result = keep(deps, result_to_store(outcome.document), result_path(operation_id))
    plan = plan_step(
        deps.settings, operation, Status.PAYMENT_COMPLETED, now=now, payment_ref=outcome.payment_ref
    )
    completed = step_event(
        PAYMENT_COMPLETED,
        operation,
        envelope,
        "payment-completed",
        now=now,
        payload={},
        ids={"paymentRef": outcome.payment_ref} if outcome.payment_ref else None,
    )
    commit_step(deps, envelope, operation, plan, completed, PAYMENT_STEP, result=result)


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
    *,
    now: datetime,
) -> datetime:
    """Send the ``attempt``-th delayed check of a chain (status or reconciliation); returns when it is due."""
    check = step_event(
        event_type, operation, cause, f"{label}-{attempt}", now=now, payload={"attempt": attempt}
    )
    _send_to_self(ctx, check, delay)
    return now + timedelta(seconds=delay)


def _check_delay(deps: StepDeps, attempt: int) -> int:
    delay = backoff_delay(
        attempt, base=float(deps.settings.payment_check_base_delay_seconds), cap=float(MAX_SQS_DELAY_SECONDS)
    )
    return min(delay, MAX_SQS_DELAY_SECONDS)


def _schedule_check(
    envelope: Envelope, ctx: RecordContext, deps: StepDeps, operation: Operation, *, now: datetime
) -> None:
    """ "Accepted, still processing": look again later with a delayed message, not a 15-minute wait.
    Past the maximum age of a pending payment the outcome counts as unknown: RECONCILING."""
    accepted_at = parse_iso(operation.payment_accepted_at) if operation.payment_accepted_at else now
    age = (now - accepted_at).total_seconds()
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
    next_at = _send_check(
        ctx, operation, envelope, PAYMENT_STATUS_CHECK_DUE, "payment-check", attempt, delay, now=now
    )
    commit(
        deps,
        envelope,
        deps.store.payment_accepted_write(
            operation.operation_id,
            now_iso(accepted_at),
            next_attempt_at=next_at,
            cause=envelope,
            on_condition_failed=seen_first(envelope, _accepted_stale(operation)),
        ),
        operation,
    )
    logger().info(
        "payment still processing; status check scheduled",
        extra={"operation_id": operation.operation_id, "attempt": attempt, "delay_seconds": delay},
    )


def _reconciliation_check(
    ctx: RecordContext, deps: StepDeps, operation: Operation, cause: Envelope, attempt: int, *, now: datetime
) -> tuple[int, datetime]:
    """Send the ``attempt``-th delayed PaymentReconciliationDue; returns (delay, when)."""
    # Never sooner than the legacy client's timeout: a call that timed out has landed by then.
    delay = max(_check_delay(deps, attempt), min(int(deps.settings.legacy_timeout_seconds) + 1, 900))
    return delay, _send_check(
        ctx, operation, cause, PAYMENT_RECONCILIATION_DUE, "reconciliation", attempt, delay, now=now
    )


def _start_reconciling(
    envelope: Envelope,
    ctx: RecordContext,
    deps: StepDeps,
    operation: Operation,
    code: str,
    reason: str,
    *,
    now: datetime,
) -> None:
    """The payment's outcome is unknown: RECONCILING, and the first reconciliation check scheduled.
    The operation is never FAILED on an unknown outcome -- money may have moved."""
    if operation.status is Status.RECONCILING:
        return
    _, next_at = _reconciliation_check(ctx, deps, operation, envelope, 1, now=now)
    plan = plan_step(
        deps.settings,
        operation,
        Status.RECONCILING,
        now=now,
        reconcile_reason=f"{code}: {reason}",
        next_attempt_at=next_at,
    )
    commit(
        deps,
        envelope,
        deps.store.transition_write(
            plan,
            on_condition_failed=seen_first(envelope, PAYMENT_STEP.on_stale(plan)),
            cause=envelope,
            operation=operation,
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
    now: datetime,
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
            fail(
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
            fail(deps, envelope, operation, "PaymentRejected", found.reason or "rejected", now=now)
            return
        unknown = "the legacy payment system still reports PROCESSING"
    spent = (now - operation.since).total_seconds()
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
    delay, next_at = _reconciliation_check(ctx, deps, operation, envelope, attempt, now=now)
    commit(
        deps,
        envelope,
        deps.store.retry_write(
            operation,
            next_attempt_at=next_at,
            error=unknown,
            cause=envelope,
            on_condition_failed=seen_first(envelope, _accepted_stale(operation, Status.RECONCILING)),
        ),
        operation,
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
