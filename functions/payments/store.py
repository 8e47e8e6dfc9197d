"""Data access for the payments tables -- the ONLY module that knows attribute names and key shapes.

Operations table (``OPERATIONS_TABLE``; pk/sk, stream NEW_AND_OLD_IMAGES, TTL ``expiresAt``): the
operation, ``pk = OPERATION#<operationId>, sk = OPERATION``. It is its own
processed-event marker and outbox (``relay.entity_events``): every step is ONE conditional write of
this item that records the eventId it processed (``seen``) and the events it produces (``ev``),
which the stream publisher publishes. The request (``request``) and the legacy system's answer
(``result``) are kept inline as canonical JSON, or in S3 above the claim-check threshold
(``requestRef``/``resultRef``), with the request's sha256 either way (``requestSha256``).

The item stays under 1 KB on the common path, because a write is billed per KB of the larger of the
item's two images: what can be derived is not stored. The operation's id is its key's suffix; its
correlation id, when the client sent none, is its id; the history's times are base-36 epoch
milliseconds; a state's start is the last transition's ``updatedAt``; the result keeps only what the
operation does not already hold (``paymentRef``, the legacy key); the invoice input is derived from the
request and the result; and the request itself leaves the item once the operation COMPLETED (its sha256
stays, to answer a retry).

Accepting is ONE conditional PutItem (``create_operation``): with an Idempotency-Key the id derives
from the caller and the key, so the item itself refuses a second acceptance, and the failed
condition's ALL_OLD answers the retry.

Every operation item carries ``schemaVersion`` 2; items written before one write per step are
rewritten by ``ops migrate`` (``payments.migration``) before this code reads them.

Deadline index (``relay.deadlines``): the operation enters ``due`` when it is accepted and leaves it
when it ended and its last event is published (``relay.outbox.settle_item``); the sweeper re-arms it
for a step that runs long.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from payments.operations import (
    Operation,
    OperationError,
    Status,
    Step,
    TransitionPlan,
    now_iso,
)
from relay import deadlines, entity_events
from relay.claim_check import Kept, canonical_bytes, kept_from_ref
from relay.ddb import BusinessWrite, OnConditionFailed
from relay.entity_store import EntityStore
from relay.envelope import ClaimCheckRef, Envelope
from relay.expressions import Condition, Update

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

from relay.state_machine import iso_moment, short_moment, state_of, transition_write

OPERATION_SK = "OPERATION"
OPERATION_KIND = "operation"
_PK_PREFIX = "OPERATION#"

# Domain field -> attribute name, for the fields a transition may set.
_ATTRIBUTES = {
    "payment_ref": "paymentRef",
    "payment_accepted_at": "paymentAcceptedAt",
    "invoice_id": "invoiceId",
    "invoice_input_ref": "invoiceInputRef",
    "expires_at": "expiresAt",
    "error": "error",
    "state_since": "stateSince",
    "next_attempt_at": "nextAttemptAt",
    "reconcile_reason": "reconcileReason",
}
# Cleared by every transition: they describe the retries of the state that is left.
_RETRY_ATTRIBUTES = ("nextAttemptAt", "lastError")


def operation_key(operation_id: str) -> dict[str, str]:
    return {"pk": f"{_PK_PREFIX}{operation_id}", "sk": OPERATION_SK}


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


def _kept_to_item(kept: Kept, inline: str, ref: str) -> dict[str, Any]:
    if kept.ref is not None:
        return {ref: _ref_to_item(kept.ref)}
    return {inline: kept.text}


def _kept_from_item(item: Mapping[str, Any], inline: str, ref: str, sha256: str | None) -> Kept | None:
    stored_ref = _ref_from_item(item.get(ref))
    if stored_ref is not None:
        return kept_from_ref(stored_ref)
    text = item.get(inline)
    if text is None:
        return None
    data = str(text).encode("utf-8")
    # The recorded sha256 (the request's) is what the text must match; a result records none, so
    # its own text's hash is taken as written (the write that stored it is the only writer).
    return Kept(str(sha256 or hashlib.sha256(data).hexdigest()), len(data), text=str(text))


# What an operation item holds beside its request and events, so neither repeats it: the inline
# request leaves out its paymentId and orderId, and the events their ids and correlation id that
# the item holds (``entity_events.compact``). A third of an order's payment item was these repeats.
_HELD_IN_REQUEST = ("paymentId", "orderId")
_HELD_IN_EVENTS = ("operationId", "paymentId", "orderId", "correlationId")


def _held(operation: Operation) -> dict[str, str]:
    """What the operation's item holds of its events' ids (``entity_events.held_values`` on the
    attributes ``create_operation`` writes, which never change): its accept and every step use it."""
    item: dict[str, Any] = {**operation_key(operation.operation_id), "paymentId": operation.payment_id}
    if operation.order_id:
        item["orderId"] = operation.order_id
    if operation.correlation_id != operation.operation_id:
        item["correlationId"] = operation.correlation_id
    return entity_events.held_values(item, _HELD_IN_EVENTS)


def _request_to_item(request: Kept, item: Mapping[str, Any]) -> dict[str, Any]:
    """The request as the item keeps it: inline without the fields the item holds (read back by
    ``_request_from_item``, byte for byte: canonical JSON), or its claim-check ref."""
    if request.ref is not None or request.text is None:
        return _kept_to_item(request, "request", "requestRef")
    document = json.loads(request.text)
    for name in _HELD_IN_REQUEST:
        if name in document and document[name] == item.get(name):
            del document[name]
    return {"request": canonical_bytes(document).decode("utf-8")}


def _request_from_item(item: Mapping[str, Any]) -> Kept | None:
    kept = _kept_from_item(item, "request", "requestRef", item.get("requestSha256"))
    if kept is None or kept.text is None:
        return kept
    document = json.loads(kept.text)
    missing = {n: item[n] for n in _HELD_IN_REQUEST if n not in document and item.get(n) is not None}
    if not missing:
        return kept  # kept whole (an item written before), or nothing was left out
    text = canonical_bytes({**document, **{k: str(v) for k, v in missing.items()}}).decode("utf-8")
    return Kept(kept.sha256, len(text.encode("utf-8")), text=text)


def _step_to_item(entry: Mapping[str, Any]) -> str:
    # "payment STARTED mi4d5v6g" (the time in base-36 epoch ms): a quarter of the map it was.
    return f"{entry['step']} {entry['status']} {short_moment(str(entry['at']))}"


def _step_from_item(value: Any) -> Step:
    step, status, at = str(value).split(" ")
    return Step(step, status, iso_moment(at))


# What the legacy system's answer holds that the operation holds already, or that derives from it.
_RESULT_DERIVED = ("operationId", "paymentRef", "idempotencyKey")


def result_to_store(document: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k not in _RESULT_DERIVED}


def result_of(operation: Operation, stored: Mapping[str, Any]) -> dict[str, Any]:
    """The legacy system's answer as it came: the stored part and what the operation derives."""
    from payments.legacy import payment_key

    derived = {"operationId": operation.operation_id, "idempotencyKey": payment_key(operation.operation_id)}
    if operation.payment_ref:
        derived["paymentRef"] = operation.payment_ref
    return {**derived, **stored}


def _to_attribute(value: Any) -> Any:
    if isinstance(value, datetime):
        return now_iso(value)
    if isinstance(value, OperationError):
        return {"code": value.code, "message": value.message}
    if isinstance(value, ClaimCheckRef):
        return _ref_to_item(value)
    return value


def operation_id_of(item: Mapping[str, Any]) -> str:
    return str(item.get("operationId") or str(item["pk"]).removeprefix(_PK_PREFIX))


def operation_from_item(item: Mapping[str, Any]) -> Operation:
    error = item.get("error")
    operation_id = operation_id_of(item)
    request = _request_from_item(item)
    if request is None:
        if not item.get("requestSha256"):
            raise ValueError(f"operation item {item.get('pk')} has no request")
        request = Kept(str(item["requestSha256"]), 0)  # COMPLETED: only its sha256 is kept
    return Operation(
        operation_id=operation_id,
        status=Status(str(item["status"])),
        version=int(item["version"]),
        payment_id=str(item["paymentId"]),
        order_id=str(item["orderId"]) if item.get("orderId") else None,
        correlation_id=str(item.get("correlationId") or operation_id),
        request=request,
        created_at=str(item["createdAt"]),
        updated_at=str(item["updatedAt"]),
        steps=tuple(_step_from_item(s) for s in item.get("steps") or []),
        error=OperationError(str(error["code"]), str(error["message"]))
        if isinstance(error, Mapping)
        else None,
        payment_ref=str(item["paymentRef"]) if item.get("paymentRef") else None,
        payment_accepted_at=str(item["paymentAcceptedAt"]) if item.get("paymentAcceptedAt") else None,
        result=_kept_from_item(item, "result", "resultRef", None),
        invoice_input_ref=_ref_from_item(item.get("invoiceInputRef")),
        invoice_id=str(item["invoiceId"]) if item.get("invoiceId") else None,
        expires_at=int(item["expiresAt"]) if item.get("expiresAt") is not None else None,
        state_since=str(item["stateSince"]) if item.get("stateSince") else None,
        next_attempt_at=str(item["nextAttemptAt"]) if item.get("nextAttemptAt") else None,
        attempts=int(item.get("attempts") or 0),
        last_error=str(item["lastError"]) if item.get("lastError") else None,
        redrives=int(item.get("redrives") or 0),
        deadline_at=deadlines.deadline_of(dict(item)),
        seen={str(k): str(v) for k, v in (item.get(entity_events.SEEN_ATTRIBUTE) or {}).items()},
        callback_url=str(item["callbackUrl"]) if item.get("callbackUrl") else None,
    )


class OperationStore(EntityStore):
    """Reads and one-write-per-step writes of operations (and the request keys of the layout before)."""

    ENTITY = "operation"
    ID_ATTRIBUTE = "operationId"
    NEW_ONE = "a new payment"
    ID_NAMESPACE = uuid.UUID("0b6c1f0e-51a3-4c43-9c5e-5f0f2b7c1a11")

    def __init__(
        self,
        *,
        operations_table: str,
        idempotency_table: str | None,
        ddb_client: DynamoDBClient,
        deadline_shards: int = deadlines.DEFAULT_SHARDS,
    ) -> None:
        super().__init__(
            table_name=operations_table, idempotency_table=idempotency_table, ddb_client=ddb_client
        )
        self.deadline_shards = deadline_shards  # what the writes hash into (the stage's count)

    # reads ---------------------------------------------------------------------------------------

    def get_operation(self, operation_id: str) -> Operation | None:
        item = self.read(operation_key(operation_id))
        return operation_from_item(item) if item else None

    # writes --------------------------------------------------------------------------------------

    def create_operation(self, operation: Operation, event: Envelope, *, deadline: datetime) -> None:
        """ONE conditional PutItem: the PENDING operation with its first event inside it (published
        from the stream) and in the deadline index until ``deadline``. Raises ``EntityExists`` with
        the stored operation when the id is taken."""
        item: dict[str, Any] = {
            **operation_key(operation.operation_id),
            "status": str(operation.status),
            "version": operation.version,
            "paymentId": operation.payment_id,
            "correlationId": operation.correlation_id,
            "requestSha256": operation.request.sha256,
            "createdAt": operation.created_at,
            "updatedAt": operation.updated_at,
            "steps": [_step_to_item(s.entry()) for s in operation.steps],
            entity_events.SEEN_ATTRIBUTE: {},
            entity_events.SCHEMA_VERSION_ATTRIBUTE: entity_events.SCHEMA_VERSION,
            **deadlines.deadline_attributes(operation.operation_id, deadline, self.deadline_shards),
        }
        if operation.correlation_id == operation.operation_id:
            del item["correlationId"]  # read back as the operation's id
        if operation.order_id:
            item["orderId"] = operation.order_id
        if operation.callback_url:
            item["callbackUrl"] = operation.callback_url
        item.update(_request_to_item(operation.request, item))
        self.create(item, event, _held(operation))

    def transition_write(
        self,
        plan: TransitionPlan,
        *,
        on_condition_failed: OnConditionFailed,
        cause: Envelope | None = None,
        events: tuple[Envelope, ...] = (),
        operation: Operation | None = None,
        result: Kept | None = None,
        result_consumed: bool = False,
    ) -> BusinessWrite:
        """The ONE conditional update that applies ``plan`` (``relay.state_machine.transition_write``)
        and records in the item the ``cause`` it processed and the ``events`` it produces
        (``relay.entity_events``; without what the ``operation`` read holds already); the retry fields
        of the state left are cleared. A ``result_consumed`` (its content is in the invoice input now)
        leaves the item, which keeps the item under 1 KB for the steps after."""
        held = _held(operation) if operation is not None else None
        attributes = dict(plan.set_attributes)
        rearm = attributes.pop("deadline_at", None)
        stored = {_ATTRIBUTES[name]: _to_attribute(value) for name, value in attributes.items()}
        if result is not None:
            stored.update(_kept_to_item(result, "result", "resultRef"))
        # A state's start is the transition's updatedAt: stateSince is only read from items before.
        stored.pop("stateSince", None)
        remove = {*_RETRY_ATTRIBUTES, "attempts", "stateSince"} - set(stored)
        if result_consumed:
            remove |= {"result"}
        if plan.target is Status.COMPLETED:
            # Done: the request served its purpose (its sha256 stays, to answer a client's retry).
            remove |= {"request"}
        if isinstance(rearm, datetime):
            stored[deadlines.AT_ATTRIBUTE] = deadlines.epoch(rearm)
        update_write = transition_write(
            self.table_name,
            operation_key(plan.entity_id),
            plan,
            history_attribute="steps",
            history_entry=_step_to_item,
            attributes=stored,
            remove=remove,
            on_condition_failed=on_condition_failed,
            record=lambda update: entity_events.record(update, cause, events, held),
        )
        return update_write

    def retry_write(
        self,
        operation: Operation,
        *,
        next_attempt_at: datetime,
        error: str,
        on_condition_failed: OnConditionFailed,
        cause: Envelope | None = None,
    ) -> BusinessWrite:
        """Record that the current step will try again at ``next_attempt_at`` (the sweeper leaves a
        step that is merely waiting alone: its deadline counts from that moment), and ``cause`` as
        processed. Not a transition: the version stays, only the state is required to be unchanged."""
        update = (
            Update()
            .set("nextAttemptAt", now_iso(next_attempt_at))
            .set("lastError", error[:500])
            .add("attempts", 1)
            # Never reset (attempts is, per state): how often this operation waited for a partner.
            .add("retries", 1)
        )
        condition = Condition().equals(status=str(operation.status))
        entity_events.record_cause(update, condition, cause)
        return update.write(
            self.table_name,
            operation_key(operation.operation_id),
            condition=condition,
            on_condition_failed=on_condition_failed,
        )

    def redrive_write(
        self,
        operation: Operation,
        event: Envelope,
        *,
        now: datetime,
        deadline: datetime,
        on_condition_failed: OnConditionFailed,
    ) -> BusinessWrite:
        """The sweeper re-drives the step: ``event`` into the item (published from the stream), the
        re-drive counted and the deadline moved -- only if nothing happened to the operation since it
        was read (same state, version and deadline)."""
        update = (
            Update()
            .add("redrives", 1)
            .set("lastRedriveAt", now_iso(now))
            .set(entity_events.EVENTS_ATTRIBUTE, [entity_events.compact(event, _held(operation))])
            .set_all(deadlines.deadline_attributes(operation.operation_id, deadline, self.deadline_shards))
        )
        return update.write(
            self.table_name,
            operation_key(operation.operation_id),
            condition=Condition().equals(
                status=str(operation.status),
                version=operation.version,
                **{deadlines.AT_ATTRIBUTE: operation.deadline_at},
            ),
            on_condition_failed=on_condition_failed,
        )

    def rearm_write(self, operation: Operation, *, deadline: datetime) -> BusinessWrite:
        """Move the operation's deadline (a step that runs long, found by the sweeper): only if its
        deadline is still the one read."""
        update = Update().set_all(
            deadlines.deadline_attributes(operation.operation_id, deadline, self.deadline_shards)
        )
        return update.write(
            self.table_name,
            operation_key(operation.operation_id),
            condition=Condition().equals(**{deadlines.AT_ATTRIBUTE: operation.deadline_at}),
            on_condition_failed=lambda _old: _Moved(),
        )

    def payment_accepted_write(
        self,
        operation_id: str,
        at: str,
        *,
        next_attempt_at: datetime,
        on_condition_failed: OnConditionFailed,
        cause: Envelope | None = None,
    ) -> BusinessWrite:
        """Record (once) when the legacy system first answered "accepted, still processing": the
        maximum age of a pending payment counts from there, not from a legacy outage before it; when
        the next status check is due (``retry_write``); and ``cause`` as processed."""
        update = (
            Update().set_if_absent("paymentAcceptedAt", at).set("nextAttemptAt", now_iso(next_attempt_at))
        )
        condition = Condition().equals(status=str(Status.PAYMENT_PROCESSING))
        entity_events.record_cause(update, condition, cause)
        return update.write(
            self.table_name,
            operation_key(operation_id),
            condition=condition,
            on_condition_failed=on_condition_failed,
        )

    def item_events(self, operation_id: str) -> tuple[list[Envelope], dict[str, Any]]:
        """The events the operation's last write put into it, and the item they came from, as the
        stream publisher has them (the sweeper re-publishes them, with the same message attributes)."""
        item = self.read(operation_key(operation_id)) or {}
        return entity_events.events_in(item), item


class _Moved(Exception):
    """The operation's deadline moved since it was read."""


def is_moved(exc: BaseException) -> bool:
    return isinstance(exc, _Moved)


def status_of(item: Mapping[str, Any] | None) -> tuple[Status | None, int | None]:
    """State and version of an operation item as returned with a failed condition (ALL_OLD)."""
    status, version = state_of(item)
    return (Status(status) if status is not None else None), version
