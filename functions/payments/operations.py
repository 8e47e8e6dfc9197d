"""The operation state machine.

    PENDING -> PAYMENT_PROCESSING -> PAYMENT_COMPLETED -> POST_PROCESSING -> INVOICE_PENDING -> COMPLETED
    PENDING, PAYMENT_PROCESSING, RECONCILING -> FAILED        (nothing was charged)
    PAYMENT_PROCESSING -> RECONCILING                         (the legacy outcome is unknown)
    RECONCILING -> PAYMENT_COMPLETED | PAYMENT_UNRESOLVED     (charged after all | nobody can tell)
    PAYMENT_COMPLETED, POST_PROCESSING, INVOICE_PENDING -> INVOICE_FAILED   (charged, never invoiced)
    PENDING -> CANCELLED                                      (the client cancelled before submission)

FAILED is reachable only while no money can have moved: once the legacy system may have charged,
the unsuccessful endings are PAYMENT_UNRESOLVED (a human must reconcile with the legacy system) and
INVOICE_FAILED (charged; the invoice was refused or could not be issued in time).

The rules every entity's state machine follows (conditional writes from the state AND version that
were read, the history entry, stale and illegal transitions) are the kernel's
(``relay.state_machine``); this module holds what is particular to an operation: its states, its
steps, the deadline of a non-terminal state and the expiry of a terminal one.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from relay.claim_check import Kept
from relay.envelope import ClaimCheckRef
from relay.state_machine import (
    AlreadyApplied,
    IllegalTransition,
    StateMachine,
    Transition,
    now_iso,
    parse_iso,
)

__all__ = ["AlreadyApplied", "IllegalTransition", "now_iso", "parse_iso"]


class Status(enum.StrEnum):
    PENDING = "PENDING"
    PAYMENT_PROCESSING = "PAYMENT_PROCESSING"
    RECONCILING = "RECONCILING"
    PAYMENT_COMPLETED = "PAYMENT_COMPLETED"
    POST_PROCESSING = "POST_PROCESSING"
    INVOICE_PENDING = "INVOICE_PENDING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    PAYMENT_UNRESOLVED = "PAYMENT_UNRESOLVED"
    INVOICE_FAILED = "INVOICE_FAILED"
    CANCELLED = "CANCELLED"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset(
    {Status.COMPLETED, Status.FAILED, Status.PAYMENT_UNRESOLVED, Status.INVOICE_FAILED, Status.CANCELLED}
)
# Terminal states that are not success: kept longer (failed_ttl_days), and each has an alarm. A
# cancellation is the client's choice, not a failure: kept as long as a success, not alarmed.
UNSUCCESSFUL = TERMINAL - {Status.COMPLETED, Status.CANCELLED}

# What each state means, for the README, the OpenAPI document and operators.
MEANING: dict[Status, str] = {
    Status.PENDING: "accepted and stored; the payment step has not started",
    Status.PAYMENT_PROCESSING: "submitted to (or being retried against) the legacy payment system",
    Status.RECONCILING: "the legacy outcome is unknown (timeout, lost reply, or checks ran out): asking "
    "the legacy system by the payment's idempotency key",
    Status.PAYMENT_COMPLETED: "charged; post-processing is next",
    Status.POST_PROCESSING: "building the invoice input",
    Status.INVOICE_PENDING: "charged; the invoice is being issued",
    Status.COMPLETED: "charged and invoiced",
    Status.FAILED: "not charged (rejected, or the legacy system has no payment under its key)",
    Status.PAYMENT_UNRESOLVED: "the legacy system could not say whether it charged within the "
    "reconciliation budget: a human must reconcile (alarmed)",
    Status.INVOICE_FAILED: "charged, but the invoice was refused or could not be issued within its "
    "budget; see error and results.paymentRef (alarmed)",
    Status.CANCELLED: "cancelled by the client before the payment was submitted; nothing was charged",
}

# The happy path, in order.
HAPPY_PATH: tuple[Status, ...] = (
    Status.PENDING,
    Status.PAYMENT_PROCESSING,
    Status.PAYMENT_COMPLETED,
    Status.POST_PROCESSING,
    Status.INVOICE_PENDING,
    Status.COMPLETED,
)
# Once the legacy system may have charged, an unsuccessful end says so.
CHARGED = frozenset({Status.PAYMENT_COMPLETED, Status.POST_PROCESSING, Status.INVOICE_PENDING})

ALLOWED: dict[Status, frozenset[Status]] = {
    current: frozenset({following}) for current, following in itertools.pairwise(HAPPY_PATH)
}
ALLOWED[Status.PENDING] |= {Status.FAILED, Status.CANCELLED}
ALLOWED[Status.PAYMENT_PROCESSING] |= {Status.FAILED, Status.RECONCILING}
ALLOWED[Status.RECONCILING] = frozenset({Status.PAYMENT_COMPLETED, Status.FAILED, Status.PAYMENT_UNRESOLVED})
for _charged in CHARGED:
    ALLOWED[_charged] |= {Status.INVOICE_FAILED}
for _terminal in TERMINAL:
    ALLOWED[_terminal] = frozenset()

# What the step history records when a state is entered: (step, step status).
STEP_OF: dict[Status, tuple[str, str]] = {
    Status.PENDING: ("request", "ACCEPTED"),
    Status.PAYMENT_PROCESSING: ("payment", "STARTED"),
    Status.RECONCILING: ("payment", "RECONCILING"),
    Status.PAYMENT_COMPLETED: ("payment", "COMPLETED"),
    Status.POST_PROCESSING: ("post-processing", "STARTED"),
    Status.INVOICE_PENDING: ("invoice", "REQUESTED"),
    Status.COMPLETED: ("invoice", "COMPLETED"),
    Status.PAYMENT_UNRESOLVED: ("payment", "UNRESOLVED"),
    Status.INVOICE_FAILED: ("invoice", "FAILED"),
    Status.CANCELLED: ("request", "CANCELLED"),
}
# The step that failed, by the state the operation was in when it became FAILED.
FAILED_STEP: dict[Status, str] = {
    Status.PENDING: "payment",
    Status.PAYMENT_PROCESSING: "payment",
    Status.RECONCILING: "payment",
}


MACHINE = StateMachine("operation", ALLOWED)
TransitionPlan = Transition[Status]


@dataclass(frozen=True)
class Step:
    step: str
    status: str
    at: str

    def entry(self) -> dict[str, str]:
        return {"step": self.step, "status": self.status, "at": self.at}


@dataclass(frozen=True)
class OperationError:
    code: str
    message: str


@dataclass(frozen=True)
class Operation:
    operation_id: str
    status: Status
    version: int
    payment_id: str
    correlation_id: str
    # The request as accepted: inline, or in S3 when above the claim-check threshold.
    request: Kept
    created_at: str
    updated_at: str
    steps: tuple[Step, ...] = ()
    order_id: str | None = None
    error: OperationError | None = None
    payment_ref: str | None = None
    payment_accepted_at: str | None = None
    # The legacy system's answer, kept like the request.
    result: Kept | None = None
    # Only operations written before the one-write layout: the invoice input's claim check.
    invoice_input_ref: ClaimCheckRef | None = None
    invoice_id: str | None = None
    expires_at: int | None = None
    # Since when the operation is in its current state (the step's budget counts from here).
    state_since: str | None = None
    # While a step waits to try again: when, how often it tried, and why it failed last.
    next_attempt_at: str | None = None
    attempts: int = 0
    last_error: str | None = None
    redrives: int = 0
    # When the sweeper looks at it next (the deadline index), None once it left the index.
    deadline_at: int | None = None
    # The events it processed (``relay.entity_events``): eventId -> payload hash.
    seen: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # Where the client wants its completion notice (``payments.notices``), checked when accepted.
    callback_url: str | None = None

    @property
    def since(self) -> datetime:
        return parse_iso(self.state_since or self.updated_at)

    def ids(self) -> dict[str, str]:
        ids = {"operationId": self.operation_id, "paymentId": self.payment_id}
        if self.order_id:
            ids["orderId"] = self.order_id
        return ids


def plan_transition(
    operation: Operation,
    target: Status,
    *,
    now: datetime,
    error: OperationError | None = None,
    ttl_days: int | None = None,
    deadlines: Mapping[Status, int] | None = None,
    **attributes: Any,
) -> TransitionPlan:
    """Check the transition against the state machine and describe the write that applies it.

    ``attributes`` are domain fields to set with the transition (e.g. ``payment_ref=``). Entering a
    terminal state needs ``ttl_days`` (clean-up never depends on anyone remembering to delete) and
    records its TTL; entering a non-terminal state clears the retry fields. The deadline index is
    not touched: the sweeper tells a step's own deadline from ``deadlines`` (seconds per state, from
    entering it) and re-arms the index only for a step that runs long.
    """
    MACHINE.check(operation.operation_id, operation.status, target)
    if target in UNSUCCESSFUL and error is None:
        raise ValueError(f"a transition to {target} needs an error")
    if error is not None:
        attributes["error"] = error
    if target is Status.FAILED:
        step = Step(FAILED_STEP[operation.status], "FAILED", now_iso(now))
    else:
        name, step_status = STEP_OF[target]
        step = Step(name, step_status, now_iso(now))
    attributes["state_since"] = step.at
    if target.terminal:
        if ttl_days is None:
            raise ValueError(f"entering terminal state {target} needs ttl_days")
        attributes["expires_at"] = int((now + timedelta(days=ttl_days)).timestamp())
    elif deadlines is None or target not in deadlines:
        raise ValueError(f"entering non-terminal state {target} needs its deadline (deadlines=)")
    return MACHINE.plan(
        operation.operation_id,
        operation.status,
        operation.version,
        target,
        at=step.at,
        entry=step.entry(),
        **attributes,
    )


def applied(operation: Operation, plan: TransitionPlan, **changes: Any) -> Operation:
    """The operation as the committed ``plan`` leaves it (state, version, history, updatedAt), with
    ``changes`` to other fields the same write set: what a caller continues from without a re-read."""
    return dataclasses.replace(
        operation,
        status=plan.target,
        version=plan.next_version,
        steps=(*operation.steps, Step(**plan.entry)),
        updated_at=plan.at,
        **changes,
    )
