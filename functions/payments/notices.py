"""Completion notices: when an operation ends, POST ``{operationId, status, paymentId, orderId,
completedAt, error?}`` once to the callback URL its client gave, signed.

Every terminal transition already publishes its event in the same transaction (OperationCompleted,
PaymentFailed, PaymentUnresolved, InvoiceFailed, OperationCancelled); the notices queue hears exactly
those (``subscriptions.NOTICES_FILTER``), so a notice can be late but never lost. The sender reads the
operation (consistently): no callback URL, nothing to do.

Once: the POST runs under ``relay.side_effects.run_once`` keyed ``{operationId}:notice`` -- a receiver
that answered 2xx is never notified again, whatever the duplicate deliveries -- and carries
``Idempotency-Key: {operationId}:notice``, so a receiver can drop the repeat of a send whose answer
was lost. The body is built from the terminal state alone, so every attempt sends the same bytes'
worth of JSON (only the signature's timestamp changes).

Signed as a Standard Webhook (``relay.signing``): ``webhook-id`` (the idempotency key above, the same
on every attempt), ``webhook-timestamp`` and ``webhook-signature: v1,<base64 HMAC-SHA256>`` over
``<id>.<timestamp>.`` + the exact body bytes, keyed with the deployment's ``whsec_`` secret (Secrets
Manager, read through Powertools' cache); a receiver verifies with any Standard Webhooks library.

Failures: the URL is checked again before each send (``relay.callback_urls``: DNS may have changed
since it was accepted), and the send connects to the address that check vetted; a host that does not
resolve now is retried; a refused URL or a 4xx (other than 408/429) is parked with the reason; a 3xx
is parked (redirects are never followed); timeouts,
5xx and 429 are retried by the kernel with backoff within the queue consumer's retry budget, then
parked with ``RetryBudgetSpent``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from payments.operations import Operation
from payments.store import OperationStore
from payments.subscriptions import NOTICE_EVENTS
from relay.callback_urls import CallbackUrlRefused, CallbackUrlUnresolved, vet_callback_url
from relay.envelope import Envelope
from relay.errors import BusinessRejection, DependencyUnavailable, InvalidInput
from relay.observability import logger, record_metric
from relay.side_effects import OnceWebhook
from relay.signing import signature_headers

SIDE_EFFECT = "completion-notice"


def notice_key(operation_id: str) -> str:
    return f"{operation_id}:notice"


def notice_body(operation: Operation) -> dict[str, Any]:
    body: dict[str, Any] = {
        "operationId": operation.operation_id,
        "status": str(operation.status),
        "paymentId": operation.payment_id,
        "orderId": operation.order_id,
        "completedAt": operation.state_since or operation.updated_at,
    }
    if operation.error is not None:
        body["error"] = {"code": operation.error.code, "message": operation.error.message}
    return body


@dataclass(frozen=True)
class NoticeDeps:
    store: OperationStore
    secret: Callable[[], str]  # the signing secret (cached by the caller)
    allow_loopback_http: bool
    timeout_seconds: float


def send_notice(envelope: Envelope, deps: NoticeDeps) -> None:
    if envelope.event_type not in NOTICE_EVENTS:
        raise InvalidInput(
            f"event {envelope.event_id} has eventType {envelope.event_type}; the notice sender handles "
            f"{', '.join(NOTICE_EVENTS)}. Check the notices subscription's filter policy."
        )
    operation_id = envelope.ids.get("operationId")
    if not operation_id:
        raise InvalidInput(f"event {envelope.event_id} ({envelope.event_type}) has no ids.operationId")
    operation = deps.store.get_operation(operation_id)
    if operation is None:
        raise InvalidInput(
            f"operation {operation_id} of event {envelope.event_id} does not exist (expired?); no notice"
        )
    if not operation.callback_url:
        return  # the client polls; nothing to send
    if not operation.status.terminal:
        raise InvalidInput(
            f"operation {operation_id} is {operation.status}, not terminal, yet {envelope.event_type} "
            "says it ended; no notice sent. Investigate the producer."
        )
    try:
        vetted = vet_callback_url(operation.callback_url, allow_loopback_http=deps.allow_loopback_http)
    except CallbackUrlUnresolved as unresolved:
        raise DependencyUnavailable(
            f"operation {operation_id}'s callback host: {unresolved}; retrying"
        ) from unresolved
    except CallbackUrlRefused as refused:
        raise BusinessRejection(
            f"operation {operation_id}'s callback URL is refused now: {refused}. Parked; no notice sent"
        ) from refused
    body = notice_body(operation)
    webhook = OnceWebhook.of(
        vetted.url,
        connect_to=vetted.address,  # never resolved again: no DNS-rebinding window
        timeout_seconds=deps.timeout_seconds,
        what=f"the callback of {operation_id}",
        idempotency_table=deps.store.idempotency_table,
        ddb_client=deps.store.ddb,
    )
    _, sent = webhook.send_once(
        SIDE_EFFECT,
        body,
        downstream_key=notice_key(operation_id),
        sign=lambda data: signature_headers(deps.secret(), notice_key(operation_id))(data),
    )
    if sent:
        record_metric("NoticeSent", event_type=envelope.event_type)
        logger().info(
            "completion notice sent", extra={"operation_id": operation_id, "status": body["status"]}
        )
    else:
        logger().info("completion notice already sent; not sent again", extra={"operation_id": operation_id})
