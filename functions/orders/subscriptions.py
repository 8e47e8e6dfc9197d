"""The fan-out contract of ``order-events``: the event types, and which queue hears which.

The orders stack builds its SNS subscriptions from these constants and the handler tests deliver
through moto's SNS -> SQS with the very same values, so a wrong filter fails a test instead of
silently starving (or flooding) a consumer. Standard library only: the CDK app imports this module
without the Lambda runtime's dependencies.

Filter policies match the ``eventType`` MESSAGE ATTRIBUTE that the kernel's outbox publisher sets
(``relay.outbox.sns_publisher``), not the message body: the default filter-policy scope.

* inventory     -- OrderCreated reserves stock, OrderCancelled releases it;
* notifications -- what a customer hears about: created, paid, rejected (a cancellation is the
  customer's own action, answered synchronously by the API);
* analytics     -- every event, no filter, RAW delivery to the analytics Firehose stream (each record
  is the envelope itself; see ``orders.archive``);
* paid-orders   -- subscribed to payments' ``payment-events``: PaymentCompleted only;
* failed-payments -- subscribed to payments' ``payment-events``: PaymentFailed and OperationCancelled
  (the payment failed, or its client cancelled it: the order is cancelled, which releases its stock).

The integration events also go to the app's EventBridge bus (``BUS_EVENT_TYPES``, source
``ORDERS_SOURCE``, detail-type = eventType, detail = the envelope), where rules route them to the
services that are not the order service's own consumers. The rules' event patterns are here too, in
EventBridge's JSON syntax (the stacks set them as is; the tests match events against them):

* shipping -- OrderPaid: request the shipment (an orders consumer, calling the external shipping API);
* points   -- OrderPaid accrues loyalty points, and OrderRejected of an order that had been paid (the
  event carries ``payload.paymentOperationId``) reverses them. A cancelled order was never paid (only
  CREATED and RESERVED orders can be cancelled), so the rule does not hear OrderCancelled.
"""

from __future__ import annotations

from typing import Final

ORDER_CREATED: Final = "OrderCreated"
ORDER_CANCELLED: Final = "OrderCancelled"
ORDER_REJECTED: Final = "OrderRejected"
ORDER_PAID: Final = "OrderPaid"
PAYMENT_COMPLETED: Final = "PaymentCompleted"  # published by payments on payment-events
PAYMENT_FAILED: Final = "PaymentFailed"  # published by payments on payment-events
PAYMENT_CANCELLED: Final = "OperationCancelled"  # published by payments on payment-events

# Everything the orders service publishes on order-events.
ORDER_EVENT_TYPES: Final = (ORDER_CREATED, ORDER_CANCELLED, ORDER_REJECTED, ORDER_PAID)

INVENTORY_FILTER: Final[dict[str, list[str]]] = {"eventType": [ORDER_CREATED, ORDER_CANCELLED]}
NOTIFICATIONS_FILTER: Final[dict[str, list[str]]] = {"eventType": [ORDER_CREATED, ORDER_PAID, ORDER_REJECTED]}
# Payments sets ``order`` ("yes"/"no") on these three outcomes (``payments.subscriptions.ORDER_ATTRIBUTE``):
# the outcome of a payment without an order never reaches orders' queues.
PAYMENT_ORDER_ATTRIBUTE: Final = "order"
PAID_ORDERS_FILTER: Final[dict[str, list[str]]] = {
    "eventType": [PAYMENT_COMPLETED],
    PAYMENT_ORDER_ATTRIBUTE: ["yes"],
}
FAILED_PAYMENTS_FILTER: Final[dict[str, list[str]]] = {
    "eventType": [PAYMENT_FAILED, PAYMENT_CANCELLED],
    PAYMENT_ORDER_ATTRIBUTE: ["yes"],
}
# Analytics takes every event: no filter policy, raw message delivery (to its Firehose stream).
ANALYTICS_RAW_DELIVERY: Final = True

# The app's event bus (core stack): what orders put there, and the rules that route it.
ORDERS_SOURCE: Final = "relay.orders"
BUS_EVENT_TYPES: Final = (ORDER_PAID, ORDER_CANCELLED, ORDER_REJECTED)
SHIPPING_RULE: Final[dict[str, object]] = {"source": [ORDERS_SOURCE], "detail-type": [ORDER_PAID]}
POINTS_RULE: Final[dict[str, object]] = {
    "source": [ORDERS_SOURCE],
    "$or": [
        {"detail-type": [ORDER_PAID]},
        {"detail-type": [ORDER_REJECTED], "detail": {"payload": {"paymentOperationId": [{"exists": True}]}}},
    ],
}
