"""The sweeper: nothing accepted is left behind past a DLQ.

Every few minutes (EventBridge Scheduler -> the sweeps queue -> this function) it reads the deadline
indexes of the operations table (``relay.deadlines``: only open work is in them, so this is one Query
per shard, never a scan) and acts on what is overdue:

* an operation is in the index from its acceptance until it ended and its last event is published;
  its steps do not move its deadline there (that would cost index writes at every step). So the
  sweeper re-reads it consistently and works out the deadline of the step it is in: its state's
  silence from entering it, or from its next scheduled attempt. Not passed yet -> the step is merely
  running long: the index's deadline is re-armed to it (the only index writes a slow step costs).
* an operation that ended but is still in the index: its last event's stream publish never finished
  (the stream's retries were spent): its events are re-published from the item and it leaves the
  index, exactly as the stream publisher does.
* a non-terminal operation whose step deadline passed has been silent: no attempt, no retry scheduled.
  - Its step's budget (in time, from entering the state) is spent -> it ends with the reason:
    PENDING -> FAILED (nothing was ever submitted), PAYMENT_PROCESSING -> RECONCILING (the worker
    then asks the legacy system), RECONCILING -> PAYMENT_UNRESOLVED, any charged state ->
    INVOICE_FAILED.
  - Otherwise its message is gone (parked, expired, deleted): the step is RE-DRIVEN with a new
    ``*RedriveDue`` event of that step, written into the item and published from the stream. The
    step's downstream idempotency keys (``{operationId}:payment``, ``{operationId}:invoice``) are
    derived from the operation, not the event, so a re-drive can never charge or invoice twice.

Every write is conditional on what was read (state, version, deadline), so a sweep racing a worker,
or two sweeps, cannot both act. Metrics: ``OperationsOverdue`` (alarmed), ``OperationsRedriven``,
``OperationsGivenUp``, ``OutboxRepublished``, ``ClaimChecksExpiring`` (alarmed: the request of a
non-terminal operation is within ``claim_check_warning_days`` of the bucket's expiry).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from payments.operations import AlreadyApplied, Operation, Status, parse_iso
from payments.settings import Settings
from payments.step_rules import (
    PAYMENT_STEP,
    REDRIVE_EVENT,
    LifecycleDeps,
    end_unsuccessfully,
    plan_step,
)
from payments.store import OPERATION_SK, is_moved, operation_id_of, operation_key
from payments.subscriptions import PAYMENT_RECONCILIATION_DUE, message_attributes
from relay import deadlines
from relay.envelope import Envelope, new_envelope
from relay.observability import logger, record_metric
from relay.outbox import settle_item, sns_publisher

if TYPE_CHECKING:
    from mypy_boto3_sns import SNSClient


# At most this many overdue items per sweep (the rest wait for the next one): a sweep stays well
# inside its function timeout even after a long outage.
MAX_ITEMS_PER_SWEEP = 500


class SweepDeps(LifecycleDeps, Protocol):
    """The lifecycle's (settings, store) and SNS, to re-publish an operation's events."""

    @property
    def sns(self) -> SNSClient: ...


@dataclass
class SweepReport:
    overdue: int = 0
    late: int = 0
    redriven: int = 0
    given_up: Counter[str] = field(default_factory=Counter)
    republished: int = 0
    rearmed: int = 0
    failed: int = 0
    claim_checks_expiring: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "overdue": self.overdue,
            "late": self.late,
            "redriven": self.redriven,
            "givenUp": dict(self.given_up),
            "republished": self.republished,
            "rearmed": self.rearmed,
            "failed": self.failed,
            "claimChecksExpiring": self.claim_checks_expiring,
        }


def sweep(deps: SweepDeps, cause: Envelope, *, now: datetime | None = None) -> SweepReport:
    """One sweep of the deadline index; ``cause`` is the schedule's SweepDue event."""
    moment = now or deps.clock()
    report = SweepReport()
    store = deps.store
    shards = deps.settings.deadline_shards_to_read
    for item in deadlines.overdue(
        store.ddb, store.table_name, moment, limit=MAX_ITEMS_PER_SWEEP, shards=shards
    ):
        # One item that fails (moved on meanwhile, SNS down) must not stop the sweep of the others:
        # counted and logged; the next sweep finds it again.
        try:
            if item.get("sk") == OPERATION_SK:
                _sweep_operation(deps, cause, operation_id_of(item), moment, report)
        except Exception:
            report.failed += 1
            logger().exception("sweep of one item failed", extra={"pk": item.get("pk"), "sk": item.get("sk")})
    for name, value in (
        ("OperationsOverdue", report.overdue),
        ("OperationsRedriven", report.redriven),
        ("OperationsGivenUp", sum(report.given_up.values())),
        ("OutboxRepublished", report.republished),
        ("SweepItemsFailed", report.failed),
        ("ClaimChecksExpiring", report.claim_checks_expiring),
    ):
        record_metric(name, value, event_type=cause.event_type)
    logger().info("sweep done", extra={"sweep": report.to_json()})
    return report


def _sweep_operation(
    deps: SweepDeps, cause: Envelope, operation_id: str, now: datetime, report: SweepReport
) -> None:
    operation = deps.store.get_operation(operation_id)  # consistent: the index may lag
    if operation is None or operation.deadline_at is None:
        return
    if operation.status.terminal:
        _settle(deps, operation, report)
        return
    if operation.deadline_at > deadlines.epoch(now):
        report.late += 1  # its deadline moved: the step is working, merely late
        return
    settings = deps.settings
    due = step_deadline(settings, operation)
    if due > now:
        # Running long, not silent: look again when this step's own deadline passes.
        try:
            deps.store.apply_one(deps.store.rearm_write(operation, deadline=due))
        except Exception as exc:
            if not is_moved(exc):
                raise
        report.late += 1
        report.rearmed += 1
        return
    report.overdue += 1
    expires = parse_iso(operation.created_at) + timedelta(days=settings.claim_check_expiration_days)
    # Only a request above the claim-check threshold lives in S3 (and expires with the bucket's rule).
    if operation.request.ref is not None and expires - now <= timedelta(
        days=settings.claim_check_warning_days
    ):
        report.claim_checks_expiring += 1
        logger().error(
            "claim check of a non-terminal operation is about to expire",
            extra={
                "operation_id": operation_id,
                "status": str(operation.status),
                "expires": expires.isoformat(),
            },
        )
    # The events the last write put into the item may never have been published (the stream gave up
    # on them): published again before anything overwrites them, so no subscriber -- orders hear
    # PaymentCompleted -- misses one. A duplicate if they were: consumers dedupe by eventId.
    report.republished += _publish_item_events(deps, operation)
    in_state = (now - operation.since).total_seconds()
    # The worker's own budget handling ends a step first; the sweeper gives it one silence more.
    if in_state >= settings.budget_seconds(operation.status) + settings.silence_seconds:
        if _give_up(deps, cause, operation, int(in_state), now):
            report.given_up[str(operation.status)] += 1
        return
    if redrive(deps, cause, operation, now):
        report.redriven += 1


# How the sweeper ends a step past its budget, by the state it is stuck in (PAYMENT_PROCESSING is not
# here: money may have moved, so it is reconciled instead). Every other state is charged already.
_ENDINGS: dict[Status, tuple[Status, str, str]] = {
    Status.PENDING: (
        Status.FAILED,
        "PaymentNeverStarted",
        "the payment was never submitted, nothing was charged",
    ),
    Status.RECONCILING: (
        Status.PAYMENT_UNRESOLVED,
        "PaymentUnresolved",
        "reconcile by hand with the legacy system",
    ),
}


def step_deadline(settings: Settings, operation: Operation) -> datetime:
    """When the step the operation is in becomes silent: its state's silence from entering it, or
    from its next scheduled attempt, whichever is later."""
    due = operation.since + timedelta(seconds=settings.deadlines[operation.status])
    if operation.next_attempt_at:
        due = max(due, settings.deadline_after(parse_iso(operation.next_attempt_at)))
    return due


def _publish_item_events(deps: SweepDeps, operation: Operation) -> int:
    events, item = deps.store.item_events(operation.operation_id)
    publish = sns_publisher(deps.settings.require("events_topic_arn"), deps.sns, message_attributes)
    for event in events:
        publish(event, item)
    if events:
        logger().warning(
            "operation's events re-published by the sweeper",
            extra={"operation_id": operation.operation_id, "events": [e.event_type for e in events]},
        )
    return len(events)


def _settle(deps: SweepDeps, operation: Operation, report: SweepReport) -> None:
    """An operation that ended is still in the index: its last events may never have been published
    (the stream gave up on them). Publish them from the item (a duplicate if they were: consumers
    dedupe by eventId), then take it out of the index like the stream publisher does."""
    report.republished += _publish_item_events(deps, operation)
    settle_item(
        deps.store.ddb,
        deps.store.table_name,
        operation_key(operation.operation_id),
        operation.version,
    )


def _give_up(deps: SweepDeps, cause: Envelope, operation: Operation, in_state: int, now: datetime) -> bool:
    """End (or, for a payment step, reconcile) a step past its budget; False when the operation moved
    on meanwhile (nothing written)."""
    budget = deps.settings.budget_seconds(operation.status)
    why = (
        f"the {operation.status} step made no progress for {in_state} s (budget {budget} s)"
        f"{f'; last error: {operation.last_error}' if operation.last_error else ''}"
    )
    try:
        if operation.status is Status.PAYMENT_PROCESSING:
            # Money may have moved: never FAILED from here, ask the legacy system first.
            plan = plan_step(
                deps.settings,
                operation,
                Status.RECONCILING,
                now=now,
                reconcile_reason=f"PaymentStepBudgetSpent: {why}",
            )
            ask = _step_event(
                PAYMENT_RECONCILIATION_DUE,
                operation,
                cause,
                "reconciliation-swept",
                now=now,
                payload={"attempt": 1},
            )
            deps.store.apply_one(
                deps.store.transition_write(
                    plan,
                    on_condition_failed=PAYMENT_STEP.on_stale(plan),
                    events=(ask,),
                    operation=operation,
                )
            )
        else:
            target, code, what = _ENDINGS.get(
                operation.status,
                (
                    Status.INVOICE_FAILED,
                    "StepBudgetSpent",
                    f"payment {operation.payment_ref} was charged and is not refunded",
                ),
            )
            end_unsuccessfully(deps, cause, operation, target, code, f"{why}; {what}", now=now, marker=False)
    except AlreadyApplied:
        return False  # it moved on meanwhile
    logger().warning(
        "sweeper gave up a step",
        extra={"operation_id": operation.operation_id, "status": str(operation.status)},
    )
    return True


def _step_event(
    event_type: str,
    operation: Operation,
    cause: Envelope,
    label: str,
    *,
    now: datetime,
    payload: dict[str, Any],
) -> Envelope:
    return new_envelope(
        event_type,
        identity=[operation.operation_id, label, str(operation.status), str(operation.redrives + 1)],
        ids=operation.ids(),
        payload=payload,
        correlation_id=operation.correlation_id,
        causation_id=cause.event_id,
        occurred_at=now,
    )


def redrive(deps: LifecycleDeps, cause: Envelope, operation: Operation, now: datetime) -> bool:
    """Re-drive the operation's current step from the item (the sweeper's, and an operator's
    ``ops replay``): a ``*RedriveDue`` event of that step, and the deadline moved -- only if nothing
    happened to the operation since it was read. False when it had moved on."""
    event_type = REDRIVE_EVENT[operation.status]
    payload: dict[str, Any] = {"redrive": operation.redrives + 1}
    # A reconciliation check is the first of a new chain; every other re-drive names the state it found.
    payload.update(
        {"attempt": 1} if event_type == PAYMENT_RECONCILIATION_DUE else {"status": str(operation.status)}
    )
    event = _step_event(event_type, operation, cause, "redrive", now=now, payload=payload)
    deadline = deps.settings.redrive_deadline(
        now, status=operation.status, since=operation.since, redrives=operation.redrives
    )
    try:
        deps.store.apply_one(
            deps.store.redrive_write(
                operation,
                event,
                now=now,
                deadline=deadline,
                on_condition_failed=lambda _old: AlreadyApplied("the operation moved on"),
            )
        )
    except AlreadyApplied:
        return False
    logger().warning(
        "step re-driven: its message was gone",
        extra={
            "operation_id": operation.operation_id,
            "status": str(operation.status),
            "event_type": event_type,
            "redrive": operation.redrives + 1,
        },
    )
    return True
