"""Tell the customer: ``POST {NOTIFY_WEBHOOK_URL}`` once per OrderCreated / OrderPaid / OrderRejected.

An HTTP call cannot join a DynamoDB transaction, so the send is guarded twice (relay.side_effects):
Powertools idempotency (keyed by the eventId, with payload validation) remembers a completed
notification, so a redelivery returns the stored result without calling again; and the webhook gets
``Idempotency-Key: {eventId}`` so a crash between its 2xx and our record cannot make a well-behaved
receiver act twice.

The same eventId arriving with a different body (a producer bug, a tampered redrive) is a
PayloadConflict: parked with the reason, never sent.
"""

from __future__ import annotations

from typing import Any

from orders.subscriptions import NOTIFICATIONS_FILTER, ORDER_CREATED, ORDER_PAID, ORDER_REJECTED
from relay.envelope import Envelope
from relay.errors import InvalidInput
from relay.observability import logger, record_metric
from relay.side_effects import OnceWebhook

WHAT = "customer notification webhook"
SIDE_EFFECT = "order-notification"
NOTIFIED = frozenset(NOTIFICATIONS_FILTER["eventType"])


def notification_body(envelope: Envelope) -> dict[str, Any]:
    """``{orderId, customerId, eventType, ...}`` -- only what the customer is told, derived from the
    event alone (the notifier has no access to the orders table)."""
    if envelope.event_type not in NOTIFIED:
        raise InvalidInput(
            f"event {envelope.event_id} has eventType {envelope.event_type}; the notifier handles "
            f"{', '.join(sorted(NOTIFIED))}. Check the subscription's filter policy."
        )
    order_id = envelope.ids.get("orderId")
    payload = envelope.payload or {}
    customer_id = payload.get("customerId")
    if not order_id or not isinstance(customer_id, str) or not customer_id:
        raise InvalidInput(
            f"event {envelope.event_id} ({envelope.event_type}) lacks ids.orderId or payload.customerId"
        )
    body: dict[str, Any] = {"orderId": order_id, "customerId": customer_id, "eventType": envelope.event_type}
    if envelope.event_type == ORDER_CREATED:
        body.update(items=payload.get("items") or [], currency=payload.get("currency"))
    elif envelope.event_type == ORDER_PAID:
        body.update(operationId=payload.get("operationId"))
    elif envelope.event_type == ORDER_REJECTED:
        body.update(reason=payload.get("reason"), sku=payload.get("sku"))
    return {k: v for k, v in body.items() if v is not None}


def notify_customer(envelope: Envelope, webhook: OnceWebhook) -> dict[str, Any]:
    """The customer webhook for this event, sent at most once (``relay.side_effects.OnceWebhook``)."""
    body = notification_body(envelope)
    result, sent = webhook.send_once(SIDE_EFFECT, body, downstream_key=envelope.event_id)
    if sent:
        record_metric("CustomerNotified", event_type=envelope.event_type)
        logger().info("customer notified", extra={"order_id": body["orderId"]})
    else:
        record_metric("Duplicate", event_type=envelope.event_type)
        logger().info("customer already notified; not sent again", extra={"order_id": body["orderId"]})
    return result
