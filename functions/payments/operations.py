"""The operation state machine.

    PENDING -> PAYMENT_PROCESSING -> PAYMENT_COMPLETED -> POST_PROCESSING -> INVOICE_PENDING -> COMPLETED
    any non-terminal state -> FAILED

The rules every entity's state machine follows (conditional writes from the state AND version that
were read, the history entry, stale and illegal transitions) are the kernel's
(``relay.state_machine``); this module holds what is particular to an operation: its states, its
steps and the expiry of a terminal operation.
"""

from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

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
    PAYMENT_COMPLETED = "PAYMENT_COMPLETED"
    POST_PROCESSING = "POST_PROCESSING"
    INVOICE_PENDING = "INVOICE_PENDING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset({Status.COMPLETED, Status.FAILED})

# The happy path, in order; FAILED is reachable from every non-terminal state.
HAPPY_PATH: tuple[Status, ...] = (
    Status.PENDING,
    Status.PAYMENT_PROCESSING,
    Status.PAYMENT_COMPLETED,
    Status.POST_PROCESSING,
    Status.INVOICE_PENDING,
    Status.COMPLETED,
)

ALLOWED: dict[Status, frozenset[Status]] = {
    current: frozenset({following, Status.FAILED}) for current, following in itertools.pairwise(HAPPY_PATH)
}
ALLOWED[Status.COMPLETED] = frozenset()
ALLOWED[Status.FAILED] = frozenset()

# What the step history records when a state is entered: (step, step status).
STEP_OF: dict[Status, tuple[str, str]] = {
    Status.PENDING: ("request", "ACCEPTED"),
    Status.PAYMENT_PROCESSING: ("payment", "STARTED"),
    Status.PAYMENT_COMPLETED: ("payment", "COMPLETED"),
    Status.POST_PROCESSING: ("post-processing", "STARTED"),
    Status.INVOICE_PENDING: ("invoice", "REQUESTED"),
    Status.COMPLETED: ("invoice", "COMPLETED"),
}
# The step that failed, by the state the operation was in when it failed.
FAILED_STEP: dict[Status, str] = {
    Status.PENDING: "payment",
    Status.PAYMENT_PROCESSING: "payment",
    Status.PAYMENT_COMPLETED: "post-processing",
    Status.POST_PROCESSING: "post-processing",
    Status.INVOICE_PENDING: "invoice",
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
    request_ref: ClaimCheckRef
    created_at: str
    updated_at: str
    steps: tuple[Step, ...] = ()
    order_id: str | None = None
    error: OperationError | None = None
    payment_ref: str | None = None
    payment_accepted_at: str | None = None
    result_ref: ClaimCheckRef | None = None
    invoice_input_ref: ClaimCheckRef | None = None
    invoice_id: str | None = None
    expires_at: int | None = None

    def ids(self) -> dict[str, str]:
        ids = {"operationId": self.operation_id, "paymentId": self.payment_id}
        if self.order_id:
            ids["orderId"] = self.order_id
        return ids


def plan_transition(
    operation: Operation,
    target: Status,
    *,
    now: datetime | None = None,
    error: OperationError | None = None,
    ttl_days: int | None = None,
    **attributes: Any,
) -> TransitionPlan:
    """Check the transition against the state machine and describe the write that applies it.

    ``attributes`` are domain fields to set with the transition (e.g. ``payment_ref=``); entering a
    terminal state needs ``ttl_days`` (clean-up never depends on anyone remembering to delete).
    """
    MACHINE.check(operation.operation_id, operation.status, target)
    moment = now or datetime.now(UTC)
    if target is Status.FAILED:
        if error is None:
            raise ValueError("a transition to FAILED needs an error")
        step = Step(FAILED_STEP[operation.status], "FAILED", now_iso(moment))
        attributes["error"] = error
    else:
        name, step_status = STEP_OF[target]
        step = Step(name, step_status, now_iso(moment))
    if target.terminal:
        if ttl_days is None:
            raise ValueError(f"entering terminal state {target} needs ttl_days")
        attributes["expires_at"] = int((moment + timedelta(days=ttl_days)).timestamp())
    return MACHINE.plan(
        operation.operation_id,
        operation.status,
        operation.version,
        target,
        at=step.at,
        entry=step.entry(),
        **attributes,
    )
