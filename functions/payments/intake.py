"""The HTTP side of the pipeline: accept a payment request (202 + operationId), describe an operation.

Accepting is: claim-check the whole request into S3 (sha256 recorded), then ONE DynamoDB transaction
that writes the PENDING operation, the ``PaymentRequested`` outbox row and -- with an
Idempotency-Key -- the key binding. Nothing is published from here: the outbox row reaches SNS via
the table stream, so a crash after the commit cannot lose the request and a crash before it leaves
only an orphan S3 object (removed by the bucket's lifecycle rule).
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from payments.models import ErrorInfo, OperationView, PaymentRequest, ResultRefs, StepView
from payments.operations import Operation, Status, Step, now_iso
from payments.store import OperationStore, RequestKeyTaken
from relay.claim_check import put_json
from relay.envelope import ClaimCheckRef, canonical_json, new_envelope

PAYMENT_REQUESTED = "PaymentRequested"


class IdempotencyKeyMismatch(Exception):
    """The Idempotency-Key is bound to an operation created from a different request body."""

    def __init__(self, idempotency_key: str, operation_id: str) -> None:
        super().__init__(
            f"Idempotency-Key {idempotency_key!r} was already used for operation {operation_id} with a "
            "different request body; nothing was stored. Send the original body to get that operation "
            "back, or use a new key for a new payment."
        )
        self.operation_id = operation_id


@dataclass(frozen=True)
class Accepted:
    operation_id: str
    status: str
    replayed: bool


def request_path(operation_id: str) -> str:
    return f"payments/{operation_id}/request.json"


def accept_payment(
    request: PaymentRequest,
    *,
    idempotency_key: str | None,
    correlation_id: str,
    store: OperationStore,
    s3_client: Any,
    bucket: str,
    key_ttl_days: int,
    now: datetime | None = None,
) -> Accepted:
    document = request.to_document()
    # The same canonical text the claim check stores, so this is also the S3 object's sha256.
    request_sha256 = hashlib.sha256(canonical_json(document).encode("utf-8")).hexdigest()
    if idempotency_key is not None:
        replay = _replay(store, idempotency_key, request_sha256)
        if replay is not None:
            return replay

    operation_id = str(uuid.uuid4())
    ref = put_json(document, bucket=bucket, key=request_path(operation_id), s3_client=s3_client)
    moment = now or datetime.now(UTC)
    at = now_iso(moment)
    operation = Operation(
        operation_id=operation_id,
        status=Status.PENDING,
        version=1,
        payment_id=request.payment_id,
        order_id=request.order_id,
        correlation_id=correlation_id,
        request_ref=ref,
        created_at=at,
        updated_at=at,
        steps=(Step("request", "ACCEPTED", at),),
    )
    event = new_envelope(
        PAYMENT_REQUESTED,
        identity=[operation_id, "payment-requested"],
        ids=operation.ids(),
        claim_check=ref,
        correlation_id=correlation_id,
        occurred_at=moment,
    )
    try:
        store.create_operation(
            operation,
            event,
            idempotency_key=idempotency_key,
            request_sha256=request_sha256,
            key_ttl_days=key_ttl_days,
        )
    except RequestKeyTaken:
        # A concurrent request with the same key committed first; ours wrote nothing but an orphan
        # S3 object (lifecycle removes it). Answer as the replay of the winner.
        replay = _replay(store, idempotency_key or "", request_sha256)
        if replay is None:  # the binding vanished between the two reads (TTL): let the client retry
            raise
        return replay
    return Accepted(operation_id, str(Status.PENDING), replayed=False)


def _replay(store: OperationStore, idempotency_key: str, request_sha256: str) -> Accepted | None:
    record = store.get_request_key(idempotency_key)
    if record is None:
        return None
    if record.request_sha256 != request_sha256:
        raise IdempotencyKeyMismatch(idempotency_key, record.operation_id)
    operation = store.get_operation(record.operation_id)
    status = str(operation.status) if operation is not None else str(Status.PENDING)
    return Accepted(record.operation_id, status, replayed=True)


def _uri(ref: ClaimCheckRef | None) -> str | None:
    return f"s3://{ref.bucket}/{ref.key}" if ref is not None else None


def describe_operation(store: OperationStore, operation_id: str) -> OperationView | None:
    operation = store.get_operation(operation_id)
    if operation is None:
        return None
    return OperationView(
        operation_id=operation.operation_id,
        status=str(operation.status),
        payment_id=operation.payment_id,
        order_id=operation.order_id,
        steps=[StepView(step=s.step, status=s.status, at=s.at) for s in operation.steps],
        error=ErrorInfo(code=operation.error.code, message=operation.error.message)
        if operation.error
        else None,
        created_at=operation.created_at,
        updated_at=operation.updated_at,
        results=ResultRefs(
            request=_uri(operation.request_ref),
            result=_uri(operation.result_ref),
            invoice_input=_uri(operation.invoice_input_ref),
            payment_ref=operation.payment_ref,
            invoice_id=operation.invoice_id,
        ),
    )
