"""The HTTP side of the pipeline: accept a payment request (202 + operationId), describe an operation.

Accepting is: claim-check the whole request into S3 (sha256 recorded), then ONE DynamoDB transaction
that writes the PENDING operation, the ``PaymentRequested`` outbox row and -- with an
Idempotency-Key -- the key binding. Nothing is published from here: the outbox row reaches SNS via
the table stream, so a crash after the commit cannot lose the request and a crash before it leaves
only an orphan S3 object (removed by the bucket's lifecycle rule).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from payments.models import ErrorInfo, OperationView, PaymentRequest, ResultRefs, StepView
from payments.operations import Operation, Status, Step, now_iso
from payments.store import OperationStore
from payments.subscriptions import PAYMENT_REQUESTED
from relay.claim_check import put_json
from relay.envelope import ClaimCheckRef, new_envelope
from relay.request_keys import Binding, IdempotencyKeyMismatch, RequestKeyRecord, request_sha256

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = ["IdempotencyKeyMismatch"]


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
    s3_client: S3Client,
    bucket: str,
    key_ttl_days: int,
    deadline_seconds: int = 900,
    now: datetime | None = None,
) -> Accepted:
    document = request.to_document()
    # The same canonical text the claim check stores, so this is also the S3 object's sha256.
    sha256 = request_sha256(document)

    def create(bind: Binding) -> Accepted:
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
            callback_url=request.callback_url,
        )
        event = new_envelope(
            PAYMENT_REQUESTED,
            identity=[operation_id, "payment-requested"],
            ids=operation.ids(),
            claim_check=ref,
            correlation_id=correlation_id,
            occurred_at=moment,
        )
        # A concurrent request with the same key that commits first leaves ours nothing but an orphan
        # S3 object (the bucket's lifecycle removes it); we answer as the replay of the winner.
        store.create_operation(
            operation, event, bind=bind, deadline=moment + timedelta(seconds=deadline_seconds)
        )
        return Accepted(operation_id, str(Status.PENDING), replayed=False)

    def replay(record: RequestKeyRecord) -> Accepted:
        operation = store.get_operation(record.entity_id)
        status = str(operation.status) if operation is not None else str(Status.PENDING)
        return Accepted(record.entity_id, status, replayed=True)

    return store.request_keys.accept_once(
        idempotency_key, sha256, ttl_days=key_ttl_days, create=create, replay=replay
    )


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
            request=_uri(operation.request_ref),
            result=_uri(operation.result_ref),
            invoice_input=_uri(operation.invoice_input_ref),
            payment_ref=operation.payment_ref,
            invoice_id=operation.invoice_id,
        ),
        callback_url=operation.callback_url,
    )
