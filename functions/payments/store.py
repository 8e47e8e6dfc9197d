"""Data access for the payments tables -- the ONLY module that knows attribute names and key shapes.

Operations table (``OPERATIONS_TABLE``; pk/sk, stream NEW_AND_OLD_IMAGES, TTL ``expiresAt``):

* the operation:   ``pk = OPERATION#<operationId>, sk = OPERATION`` (kind ``operation``)
* its outbox rows: ``pk = OPERATION#<operationId>, sk = OUTBOX#<eventType>#<eventId>`` (kind
  ``outbox``, written by ``relay.outbox.outbox_write``) -- in the operation's partition so its
  history reads with one Query; the stream publisher picks them up.

Idempotency table (``IDEMPOTENCY_TABLE``; pk ``id``, TTL ``expiresAt``), shared with the kernel's
processed-event markers and Powertools idempotency records:

* a client Idempotency-Key: ``id = request-key#<key>`` -> operationId and the request's sha256.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from payments.operations import Operation, OperationError, Status, Step, TransitionPlan
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
}


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
    )


class OperationStore(EntityStore):
    """Reads and (transactional) writes of operations, outbox rows and client idempotency keys."""

    ENTITY = "operation"
    ID_ATTRIBUTE = "operationId"
    NEW_ONE = "a new payment"

    def __init__(self, *, operations_table: str, idempotency_table: str, ddb_client: DynamoDBClient) -> None:
        super().__init__(
            table_name=operations_table, idempotency_table=idempotency_table, ddb_client=ddb_client
        )

    # reads ---------------------------------------------------------------------------------------

    def get_operation(self, operation_id: str) -> Operation | None:
        item = self.read(operation_key(operation_id))
        return operation_from_item(item) if item else None

    # writes --------------------------------------------------------------------------------------

    def create_operation(self, operation: Operation, event: Envelope, *, bind: Binding) -> None:
        """ONE transaction: the PENDING operation, its ``PaymentRequested`` outbox row and, with a
        client Idempotency-Key, the key binding (``relay.request_keys``)."""
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
        }
        if operation.order_id:
            item["orderId"] = operation.order_id
        self.apply(
            [
                put(self.table_name, item, "attribute_not_exists(pk)"),
                self.outbox_write(operation.operation_id, event),
                *bind(operation.operation_id),
            ]
        )

    def outbox_write(self, operation_id: str, event: Envelope) -> BusinessWrite:
        return self.outbox_row(event, outbox_key(operation_id, event))

    def transition_write(
        self, plan: TransitionPlan, *, on_condition_failed: OnConditionFailed
    ) -> BusinessWrite:
        """The conditional update that applies ``plan`` (``relay.state_machine.transition_write``)."""
        return transition_write(
            self.table_name,
            operation_key(plan.entity_id),
            plan,
            history_attribute="steps",
            attributes={
                _ATTRIBUTES[name]: _to_attribute(value) for name, value in plan.set_attributes.items()
            },
            on_condition_failed=on_condition_failed,
        )

    def payment_accepted_write(
        self, operation_id: str, at: str, *, on_condition_failed: OnConditionFailed
    ) -> BusinessWrite:
        """Record (once) when the legacy system first answered "accepted, still processing": the
        maximum age of a pending payment counts from there, not from a legacy outage before it."""
        return (
            Update()
            .set_if_absent("paymentAcceptedAt", at)
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
