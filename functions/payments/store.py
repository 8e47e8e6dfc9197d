"""Data access for the payments tables -- the ONLY module that knows attribute names and key shapes.

Operations table (``OPERATIONS_TABLE``; pk/sk, stream NEW_AND_OLD_IMAGES, TTL ``expiresAt``):

* the operation:   ``pk = OPERATION#<operationId>, sk = OPERATION`` (kind ``operation``)
* its outbox rows: ``pk = OPERATION#<operationId>, sk = OUTBOX#<eventType>#<eventId>`` (kind
  ``outbox``, written by ``relay.outbox.outbox_write``) -- in the operation's partition so its
  history reads with one Query; the stream publisher picks them up.

Idempotency table (``IDEMPOTENCY_TABLE``; pk ``id``, TTL ``expiresAt``), shared with the kernel's
processed-event markers and Powertools idempotency records:

* a client Idempotency-Key: ``id = request-key#<key>`` -> operationId and the request's sha256.

Deadline index (``relay.deadlines``, GSI ``by-deadline`` of the operations table): a non-terminal
operation and an unpublished outbox row carry ``deadlineShard``/``deadlineAt``; the sweeper queries
it for what is overdue. Entering a terminal state removes them, so the index holds only open work.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from payments.operations import Operation, OperationError, Status, Step, TransitionPlan, now_iso
from relay import deadlines
from relay.entity_store import EntityStore
from relay.envelope import ClaimCheckRef, Envelope
from relay.expressions import Condition, Update
from relay.idempotency import (
    BusinessWrite,
    OnConditionFailed,
    put,
)
from relay.request_keys import Binding

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

from relay.state_machine import state_of, transition_write

OPERATION_SK = "OPERATION"
OPERATION_KIND = "operation"

# Domain field -> attribute name, for the fields a transition may set.
_ATTRIBUTES = {
    "payment_ref": "paymentRef",
    "payment_accepted_at": "paymentAcceptedAt",
    "result_ref": "resultRef",
    "invoice_input_ref": "invoiceInputRef",
    "invoice_id": "invoiceId",
    "expires_at": "expiresAt",
    "error": "error",
    "state_since": "stateSince",
    "next_attempt_at": "nextAttemptAt",
    "reconcile_reason": "reconcileReason",
}
# Cleared by every transition: they describe the retries of the state that is left.
_RETRY_ATTRIBUTES = ("nextAttemptAt", "lastError")
# How long an outbox row may stay unpublished before the sweeper re-publishes it.
OUTBOX_PUBLISH_GRACE = timedelta(minutes=5)


def operation_key(operation_id: str) -> dict[str, str]:
    return {"pk": f"OPERATION#{operation_id}", "sk": OPERATION_SK}


def outbox_key(operation_id: str, envelope: Envelope) -> dict[str, str]:
    return {"pk": f"OPERATION#{operation_id}", "sk": f"OUTBOX#{envelope.event_type}#{envelope.event_id}"}


def _ref_to_item(ref: ClaimCheckRef) -> dict[str, Any]:
    return {"bucket": ref.bucket, "key": ref.key, "sha256": ref.sha256, "size": ref.size}


def _ref_from_item(value: Any) -> ClaimCheckRef | None:
    if not isinstance(value, Mapping):
        return None
    return ClaimCheckRef(
        bucket=str(value["bucket"]),
        key=str(value["key"]),
        sha256=str(value["sha256"]),
        size=int(value["size"]),
    )


def _to_attribute(value: Any) -> Any:
    if isinstance(value, datetime):
        return now_iso(value)
    if isinstance(value, ClaimCheckRef):
        return _ref_to_item(value)
    if isinstance(value, OperationError):
        return {"code": value.code, "message": value.message}
    return value


def operation_from_item(item: Mapping[str, Any]) -> Operation:
    error = item.get("error")
    request_ref = _ref_from_item(item.get("requestRef"))
    if request_ref is None:
        raise ValueError(f"operation item {item.get('pk')} has no requestRef")
    return Operation(
        operation_id=str(item["operationId"]),
        status=Status(str(item["status"])),
        version=int(item["version"]),
        payment_id=str(item["paymentId"]),
        order_id=str(item["orderId"]) if item.get("orderId") else None,
        correlation_id=str(item.get("correlationId") or item["operationId"]),
        request_ref=request_ref,
        created_at=str(item["createdAt"]),
        updated_at=str(item["updatedAt"]),
        steps=tuple(Step(str(s["step"]), str(s["status"]), str(s["at"])) for s in item.get("steps") or []),
        error=OperationError(str(error["code"]), str(error["message"]))
        if isinstance(error, Mapping)
        else None,
        payment_ref=str(item["paymentRef"]) if item.get("paymentRef") else None,
        payment_accepted_at=str(item["paymentAcceptedAt"]) if item.get("paymentAcceptedAt") else None,
        result_ref=_ref_from_item(item.get("resultRef")),
        invoice_input_ref=_ref_from_item(item.get("invoiceInputRef")),
        invoice_id=str(item["invoiceId"]) if item.get("invoiceId") else None,
        expires_at=int(item["expiresAt"]) if item.get("expiresAt") is not None else None,
        state_since=str(item["stateSince"]) if item.get("stateSince") else None,
        next_attempt_at=str(item["nextAttemptAt"]) if item.get("nextAttemptAt") else None,
        attempts=int(item.get("attempts") or 0),
        last_error=str(item["lastError"]) if item.get("lastError") else None,
        redrives=int(item.get("redrives") or 0),
        deadline_at=int(item[deadlines.AT_ATTRIBUTE])
        if item.get(deadlines.AT_ATTRIBUTE) is not None
        else None,
        callback_url=str(item["callbackUrl"]) if item.get("callbackUrl") else None,
    )


class OperationStore(EntityStore):
    """Reads and (transactional) writes of operations, outbox rows and client idempotency keys."""

    ENTITY = "operation"
    ID_ATTRIBUTE = "operationId"
    NEW_ONE = "a new payment"

    def __init__(
        self, *, operations_table: str, idempotency_table: str | None, ddb_client: DynamoDBClient
    ) -> None:
        super().__init__(
            table_name=operations_table, idempotency_table=idempotency_table, ddb_client=ddb_client
        )

    # reads ---------------------------------------------------------------------------------------

    def get_operation(self, operation_id: str) -> Operation | None:
        item = self.read(operation_key(operation_id))
        return operation_from_item(item) if item else None

    # writes --------------------------------------------------------------------------------------

    def create_operation(
        self, operation: Operation, event: Envelope, *, bind: Binding, deadline: datetime
    ) -> None:
        """ONE transaction: the PENDING operation (in the deadline index until ``deadline``), its
        ``PaymentRequested`` outbox row and, with a client Idempotency-Key, the key binding
        (``relay.request_keys``)."""
        item = {
            **operation_key(operation.operation_id),
            "kind": OPERATION_KIND,
            "operationId": operation.operation_id,
            "status": str(operation.status),
            "version": operation.version,
            "paymentId": operation.payment_id,
            "correlationId": operation.correlation_id,
            "requestRef": _ref_to_item(operation.request_ref),
            "createdAt": operation.created_at,
            "updatedAt": operation.updated_at,
            "steps": [s.entry() for s in operation.steps],
            "stateSince": operation.created_at,
            **deadlines.deadline_attributes(operation.operation_id, deadline),
        }
        if operation.order_id:
            item["orderId"] = operation.order_id
        if operation.callback_url:
            item["callbackUrl"] = operation.callback_url
        self.apply(
            [
                put(self.table_name, item, "attribute_not_exists(pk)"),
                self.outbox_write(operation.operation_id, event),
                *bind(operation.operation_id),
            ]
        )

    def outbox_write(self, operation_id: str, event: Envelope) -> BusinessWrite:
        """The outbox row of ``event`` (re-published by the sweeper if still unpublished after
        ``OUTBOX_PUBLISH_GRACE``)."""
        return self.outbox_row(
            event, outbox_key(operation_id, event), publish_by=datetime.now(UTC) + OUTBOX_PUBLISH_GRACE
        )

    def transition_write(
        self, plan: TransitionPlan, *, on_condition_failed: OnConditionFailed
    ) -> BusinessWrite:
        """The conditional update that applies ``plan`` (``relay.state_machine.transition_write``):
        the retry fields of the state left are cleared; a terminal state leaves the deadline index."""
        attributes = dict(plan.set_attributes)
        deadline = attributes.pop("deadline_at", None)
        stored = {_ATTRIBUTES[name]: _to_attribute(value) for name, value in attributes.items()}
        stored["attempts"] = 0
        remove = set(_RETRY_ATTRIBUTES) - set(stored)
        if isinstance(deadline, datetime):
            stored.update(deadlines.deadline_attributes(plan.entity_id, deadline))
        if plan.target.terminal:
            remove |= set(deadlines.ATTRIBUTES)
        return transition_write(
            self.table_name,
            operation_key(plan.entity_id),
            plan,
            history_attribute="steps",
            attributes=stored,
            remove=remove,
            on_condition_failed=on_condition_failed,
        )

    def retry_write(
        self,
        operation: Operation,
        *,
        next_attempt_at: datetime,
        deadline: datetime,
        error: str,
        on_condition_failed: OnConditionFailed,
    ) -> BusinessWrite:
        """Record that the current step will try again at ``next_attempt_at`` (its deadline moves to
        ``deadline``, so the sweeper leaves a step that is merely waiting alone). Not a transition:
        the version stays, only the state is required to be unchanged."""
        return (
            Update()
            .set("nextAttemptAt", now_iso(next_attempt_at))
            .set("lastError", error[:500])
            .add("attempts", 1)
            # Never reset (attempts is, per state): how often this operation waited for a partner.
            .add("retries", 1)
            .set(deadlines.AT_ATTRIBUTE, deadlines.epoch(deadline))
            .write(
                self.table_name,
                operation_key(operation.operation_id),
                condition=Condition().equals(status=str(operation.status)),
                on_condition_failed=on_condition_failed,
            )
        )

    def redrive_write(
        self, operation: Operation, *, deadline: datetime, on_condition_failed: OnConditionFailed
    ) -> BusinessWrite:
        """The sweeper re-drove the step: count it and move the deadline -- only if nothing happened
        to the operation since it was read (same state, version and deadline)."""
        return (
            Update()
            .add("redrives", 1)
            .set("lastRedriveAt", now_iso(datetime.now(UTC)))
            .set(deadlines.AT_ATTRIBUTE, deadlines.epoch(deadline))
            .write(
                self.table_name,
                operation_key(operation.operation_id),
                condition=Condition().equals(
                    status=str(operation.status),
                    version=operation.version,
                    **{deadlines.AT_ATTRIBUTE: operation.deadline_at},
                ),
                on_condition_failed=on_condition_failed,
            )
        )

    def payment_accepted_write(
        self,
        operation_id: str,
        at: str,
        *,
        next_attempt_at: datetime,
        deadline: datetime,
        on_condition_failed: OnConditionFailed,
    ) -> BusinessWrite:
        """Record (once) when the legacy system first answered "accepted, still processing": the
        maximum age of a pending payment counts from there, not from a legacy outage before it. The
        next status check's time moves the deadline, as for any retry (``retry_write``)."""
        return (
            Update()
            .set_if_absent("paymentAcceptedAt", at)
            .set("nextAttemptAt", now_iso(next_attempt_at))
            .set(deadlines.AT_ATTRIBUTE, deadlines.epoch(deadline))
            .write(
                self.table_name,
                operation_key(operation_id),
                condition=Condition().equals(status=str(Status.PAYMENT_PROCESSING)),
                on_condition_failed=on_condition_failed,
            )
        )


def status_of(item: Mapping[str, Any] | None) -> tuple[Status | None, int | None]:
    """State and version of an operation item as returned with a failed condition (ALL_OLD)."""
    status, version = state_of(item)
    return (Status(status) if status is not None else None), version
