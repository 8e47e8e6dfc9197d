"""A client cancels an operation: ``POST /operations/{operationId}/cancel``.

Only a PENDING operation can be cancelled: until the payment worker moves it to PAYMENT_PROCESSING,
nothing has been sent to the legacy system. The cancel is ONE conditional write -- PENDING ->
CANCELLED, conditional on the state and version read, with the ``OperationCancelled`` event in the item
(orders release the reservation on it) -- and the worker's own step starts with the conditional PENDING ->
PAYMENT_PROCESSING, so exactly one of the two wins:

* the cancel first: the worker's condition fails, it re-reads CANCELLED (a payment step "done" state)
  and acknowledges without calling the legacy system;
* the worker first: the cancel's condition fails, it re-reads PAYMENT_PROCESSING and answers 409.

A repeated cancel of a CANCELLED operation gets the same answer (the operation), without a second
event; the event's id derives from the operation's, so even a retried write cannot make two.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

from payments.operations import Operation, OperationError, Status, applied
from payments.settings import Settings
from payments.step_rules import plan_step
from payments.store import OperationStore
from payments.subscriptions import OPERATION_CANCELLED
from relay.envelope import new_envelope
from relay.errors import ConcurrentWrite

CANCEL_ATTEMPTS = 3
CANCELLED_CODE = "Cancelled"
DEFAULT_REASON = "cancelled by the client"


class _Changed(Exception):
    """The operation changed between the read and the conditional write."""


class OperationNotFound(Exception):
    def __init__(self, operation_id: str) -> None:
        super().__init__(f"no operation {operation_id}")


class NotCancellable(Exception):
    """The payment was already submitted, or the operation ended (answered 409)."""

    def __init__(self, operation: Operation) -> None:
        if operation.status.terminal:
            why = f"it already ended ({operation.status}) and can no longer change"
        else:
            why = (
                "the payment was already submitted to the legacy payment system, which cannot be "
                "called back; the operation runs to its end (poll it, or wait for its notice)"
            )
        super().__init__(
            f"operation {operation.operation_id} is {operation.status}: {why}. Only a PENDING "
            "operation can be cancelled"
        )
        self.status = operation.status


@dataclasses.dataclass(frozen=True)
class Cancelled:
    operation: Operation
    already: bool  # True: it was cancelled before (this is a repeated cancel)


def cancel_operation(
    store: OperationStore,
    settings: Settings,
    operation_id: str,
    *,
    reason: str | None = None,
    now: datetime,
) -> Cancelled:
    for _ in range(CANCEL_ATTEMPTS):
        operation = store.get_operation(operation_id)
        if operation is None:
            raise OperationNotFound(operation_id)
        if operation.status is Status.CANCELLED:
            return Cancelled(operation, already=True)
        if operation.status is not Status.PENDING:
            raise NotCancellable(operation)
        error = OperationError(CANCELLED_CODE, reason or DEFAULT_REASON)
        plan = plan_step(settings, operation, Status.CANCELLED, now=now, error=error)
        event = new_envelope(
            OPERATION_CANCELLED,
            identity=[operation_id, "cancelled"],
            ids=operation.ids(),
            payload={"reason": error.message},
            correlation_id=operation.correlation_id,
            occurred_at=now,
        )
        try:
            store.apply_one(
                store.transition_write(
                    plan,
                    on_condition_failed=lambda _old: _Changed(),
                    events=(event,),
                    operation=operation,
                )
            )
        except _Changed:
            continue  # the worker (or another cancel) moved it meanwhile: read again, decide again
        return Cancelled(applied(operation, plan, error=error), already=False)
    raise ConcurrentWrite(
        f"operation {operation_id} kept changing while it was being cancelled ({CANCEL_ATTEMPTS} "
        "attempts); retry"
    )
