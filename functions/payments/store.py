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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from payments.operations import (
    Operation,
    OperationError,
    Status,
    Step,
    TransitionPlan,
    now_iso,
)
from relay.envelope import ClaimCheckRef, Envelope
from relay.idempotency import (
    BusinessWrite,
    OnConditionFailed,
    apply_writes,
    condition_check,
    deserialize_item,
    marker_id,
    put,
    serialize_item,
    update,
)
from relay.outbox import outbox_write

OPERATION_SK = "OPERATION"
OPERATION_KIND = "operation"
REQUEST_KEY_KIND = "request-key"

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


def request_key_id(idempotency_key: str) -> str:
    return f"request-key#{idempotency_key}"


@dataclass(frozen=True)
class RequestKeyRecord:
    """What a client's Idempotency-Key is bound to."""

    idempotency_key: str
    operation_id: str
    request_sha256: str


class RequestKeyTaken(Exception):
    """The Idempotency-Key was bound to another operation by a concurrent request; read it again."""


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


def _step_item(step: Step) -> dict[str, str]:
    return {"step": step.step, "status": step.status, "at": step.at}


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


class OperationStore:
    """Reads and (transactional) writes of operations, outbox rows and client idempotency keys."""

    def __init__(self, *, operations_table: str, idempotency_table: str, ddb_client: Any) -> None:
        self.operations_table = operations_table
        self.idempotency_table = idempotency_table
        self.ddb = ddb_client

    # reads ---------------------------------------------------------------------------------------

    def get_operation(self, operation_id: str) -> Operation | None:
        response = self.ddb.get_item(
            TableName=self.operations_table,
            Key=serialize_item(operation_key(operation_id)),
            # The consumers decide what to do from this state: a stale read would only cost a
            # failed conditional write, but consistent reads make that rare.
            ConsistentRead=True,
        )
        item = response.get("Item")
        return operation_from_item(deserialize_item(item)) if item else None

    def get_request_key(self, idempotency_key: str) -> RequestKeyRecord | None:
        response = self.ddb.get_item(
            TableName=self.idempotency_table,
            Key={"id": {"S": request_key_id(idempotency_key)}},
            ConsistentRead=True,
        )
        item = response.get("Item")
        if not item:
            return None
        plain = deserialize_item(item)
        return RequestKeyRecord(idempotency_key, str(plain["operationId"]), str(plain["requestSha256"]))

    def is_processed(self, envelope: Envelope) -> bool:
        """Whether the kernel's processed-event marker for this event exists. A cheap early exit for
        duplicates only: correctness comes from the marker being written in the same transaction."""
        response = self.ddb.get_item(
            TableName=self.idempotency_table,
            Key={"id": {"S": marker_id(envelope.event_id)}},
            ConsistentRead=True,
            ProjectionExpression="id",
        )
        return bool(response.get("Item"))

    # writes --------------------------------------------------------------------------------------

    def create_operation(
        self,
        operation: Operation,
        event: Envelope,
        *,
        idempotency_key: str | None,
        request_sha256: str,
        key_ttl_days: int,
    ) -> None:
        """ONE transaction: the PENDING operation, its ``PaymentRequested`` outbox row and, with a
        client Idempotency-Key, the key binding (raises RequestKeyTaken if a concurrent request won)."""
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
            "steps": [_step_item(s) for s in operation.steps],
        }
        if operation.order_id:
            item["orderId"] = operation.order_id
        writes: list[BusinessWrite] = [
            put(self.operations_table, item, "attribute_not_exists(pk)"),
            self.outbox_write(operation.operation_id, event),
        ]
        if idempotency_key is not None:
            created = datetime.now(UTC)
            writes.append(
                put(
                    self.idempotency_table,
                    {
                        "id": request_key_id(idempotency_key),
                        "kind": REQUEST_KEY_KIND,
                        "operationId": operation.operation_id,
                        "requestSha256": request_sha256,
                        "createdAt": now_iso(created),
                        "expiresAt": int((created + timedelta(days=key_ttl_days)).timestamp()),
                    },
                    "attribute_not_exists(id)",
                    on_condition_failed=lambda _old: RequestKeyTaken(idempotency_key),
                )
            )
        self.apply(writes)

    def outbox_write(self, operation_id: str, event: Envelope) -> BusinessWrite:
        return outbox_write(event, table_name=self.operations_table, key=outbox_key(operation_id, event))

    def transition_write(
        self, plan: TransitionPlan, *, on_condition_failed: OnConditionFailed
    ) -> BusinessWrite:
        """The conditional update that applies ``plan``: only from the state AND version it was
        planned from, so a concurrent or stale writer fails instead of overwriting."""
        names = {"#status": "status", "#version": "version", "#steps": "steps", "#updatedAt": "updatedAt"}
        values: dict[str, Any] = {
            ":source": str(plan.source),
            ":target": str(plan.target),
            ":expected": plan.expected_version,
            ":next": plan.next_version,
            ":step": [_step_item(plan.step)],
            ":now": plan.step.at,
        }
        sets = [
            "#status = :target",
            "#version = :next",
            "#updatedAt = :now",
            "#steps = list_append(if_not_exists(#steps, :empty), :step)",
        ]
        values[":empty"] = []
        for index, (field, value) in enumerate(sorted(plan.set_attributes.items())):
            attribute = _ATTRIBUTES[field]
            names[f"#a{index}"] = attribute
            values[f":a{index}"] = _to_attribute(value)
            sets.append(f"#a{index} = :a{index}")
        return update(
            self.operations_table,
            operation_key(plan.operation_id),
            "SET " + ", ".join(sets),
            "#status = :source AND #version = :expected",
            names=names,
            values=values,
            on_condition_failed=on_condition_failed,
        )

    def payment_accepted_write(
        self, operation_id: str, at: str, *, on_condition_failed: OnConditionFailed
    ) -> BusinessWrite:
        """Record (once) when the legacy system first answered "accepted, still processing": the
        maximum age of a pending payment counts from there, not from a legacy outage before it."""
        return update(
            self.operations_table,
            operation_key(operation_id),
            "SET #accepted = if_not_exists(#accepted, :at)",
            "#status = :processing",
            names={"#accepted": "paymentAcceptedAt", "#status": "status"},
            values={":at": at, ":processing": str(Status.PAYMENT_PROCESSING)},
            on_condition_failed=on_condition_failed,
        )

    def still_in_write(
        self, operation_id: str, status: Status, *, on_condition_failed: OnConditionFailed
    ) -> BusinessWrite:
        """A ConditionCheck that the operation is still in ``status`` (no write)."""
        return condition_check(
            self.operations_table,
            operation_key(operation_id),
            "#status = :status",
            names={"#status": "status"},
            values={":status": str(status)},
            on_condition_failed=on_condition_failed,
        )

    def apply(self, writes: Sequence[BusinessWrite]) -> None:
        """One transaction without a processed-event marker (the consumers use commit_once)."""
        apply_writes(writes, ddb_client=self.ddb)


def status_of(item: Mapping[str, Any] | None) -> tuple[Status | None, int | None]:
    """State and version of an operation item as returned with a failed condition (ALL_OLD)."""
    if not item or "status" not in item:
        return None, None
    return Status(str(item["status"])), int(item.get("version", 0))
