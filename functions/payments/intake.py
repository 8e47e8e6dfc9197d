"""The HTTP side of the pipeline: accept a payment request (202 + operationId), describe an operation.

Accepting is ONE conditional PutItem (``OperationStore.create_operation``): the PENDING operation with
its request inline (or claim-checked into S3 when above the threshold, sha256 recorded either way)
and its first event, ``PaymentRequested``, inside the item. Nothing is published from here: the
event reaches SNS via the table stream, so a crash after the write cannot lose the request.

With an Idempotency-Key the operationId derives from the caller and the key, so the item itself
refuses a second acceptance and the failed condition's ALL_OLD answers the retry: the same body gets
the same 202, another body a 422 (``IdempotencyKeyMismatch``), and nothing more is stored either way.
Without a key the id is random. Keys bound before the one-write layout (request-key items, kept until
their TTL) are looked up first only while the stage says some may still exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from payments.models import ErrorInfo, OperationView, PaymentRequest, ResultRefs, StepView
from payments.operations import Operation, Status, Step, now_iso
from payments.store import OperationStore, operation_key
from payments.subscriptions import PAYMENT_REQUESTED
from relay.claim_check import DEFAULT_THRESHOLD_BYTES, keep_json
from relay.envelope import ClaimCheckRef, new_envelope
from relay.request_keys import EntityExists, IdempotencyKeyMismatch, request_sha256

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = ["IdempotencyKeyMismatch"]


@dataclass(frozen=True)
class Accepted:
    operation_id: str
    status: str
    replayed: bool


def request_path(operation_id: str, sha256: str) -> str:
    # The request's hash in the key: a retry with another body never overwrites the accepted one.
    return f"payments/{operation_id}/request-{sha256[:16]}.json"


def accept_payment(
    request: PaymentRequest,
    *,
    idempotency_key: str | None,
    correlation_id: str | None,
    store: OperationStore,
    s3_client: S3Client,
    bucket: str,
    caller: str = "anonymous",
    claim_check_threshold_bytes: int = DEFAULT_THRESHOLD_BYTES,
    request_key_items: bool = False,
    deadline_seconds: int = 900,
    now: datetime,
) -> Accepted:
    document = request.to_document()
    # The same canonical text a claim check would store, so this is also its sha256.
    sha256 = request_sha256(document)
    if idempotency_key is not None and request_key_items:
        bound = store.request_keys.replayed(idempotency_key, sha256)
        if bound is not None:
            found = store.get_operation(bound.entity_id)
            status = str(found.status) if found is not None else str(Status.PENDING)
            return Accepted(bound.entity_id, status, replayed=True)
    operation_id = store.new_id(caller, idempotency_key)
    kept = keep_json(
        document,
        threshold_bytes=claim_check_threshold_bytes,
        bucket=bucket,
        key=request_path(operation_id, sha256),
        s3_client=s3_client,
    )
    at = now_iso(now)
    correlation_id = correlation_id or operation_id
    operation = Operation(
        operation_id=operation_id,
        status=Status.PENDING,
        version=1,
        payment_id=request.payment_id,
        order_id=request.order_id,
        correlation_id=correlation_id,
        request=kept,
        created_at=at,
        updated_at=at,
        steps=(Step("request", "ACCEPTED", at),),
        callback_url=request.callback_url,
    )
    event = new_envelope(
        PAYMENT_REQUESTED,
        identity=[operation_id, "payment-requested"],
        ids=operation.ids(),
        payload={},
        correlation_id=correlation_id,
        occurred_at=now,
    )
    try:
        store.create_operation(operation, event, deadline=now + timedelta(seconds=deadline_seconds))
    except EntityExists as exists:
        key = operation_key(operation_id)
        stored = store.existing(
            exists, key, sha256=sha256, idempotency_key=idempotency_key, entity_id=operation_id
        )
        return Accepted(operation_id, str(stored.get("status") or Status.PENDING), replayed=True)
    return Accepted(operation_id, str(Status.PENDING), replayed=False)


def _uri(ref: ClaimCheckRef | None) -> str | None:
    return f"s3://{ref.bucket}/{ref.key}" if ref is not None else None


def describe_operation(store: OperationStore, operation_id: str) -> OperationView | None:
    operation = store.get_operation(operation_id)
    return view_of(operation) if operation is not None else None


def view_of(operation: Operation) -> OperationView:
    return OperationView(
        operation_id=operation.operation_id,
        status=operation.status,
        payment_id=operation.payment_id,
        order_id=operation.order_id,
        steps=[StepView(step=s.step, status=s.status, at=s.at) for s in operation.steps],
        error=ErrorInfo(code=operation.error.code, message=operation.error.message)
        if operation.error
        else None,
        created_at=operation.created_at,
        updated_at=operation.updated_at,
        next_attempt_at=operation.next_attempt_at,
        attempts=operation.attempts or None,
        results=ResultRefs(
            request=operation.request.uri,
            result=operation.result.uri if operation.result is not None else None,
            invoice_input=_uri(operation.invoice_input_ref),
            payment_ref=operation.payment_ref,
            invoice_id=operation.invoice_id,
        ),
        callback_url=operation.callback_url,
    )
