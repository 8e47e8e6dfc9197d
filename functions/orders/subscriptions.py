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
* analytics     -- every event, no filter, RAW delivery (the SQS body is the envelope itself);
* paid-orders   -- subscribed to payments' ``payment-events``: PaymentCompleted only;
* failed-payments -- subscribed to payments' ``payment-events``: PaymentFailed and OperationCancelled
  (the payment failed, or its client cancelled it: the order is cancelled, which releases its stock).
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
PAID_ORDERS_FILTER: Final[dict[str, list[str]]] = {"eventType": [PAYMENT_COMPLETED]}
FAILED_PAYMENTS_FILTER: Final[dict[str, list[str]]] = {"eventType": [PAYMENT_FAILED, PAYMENT_CANCELLED]}
# Analytics takes every event: no filter policy, raw message delivery.
ANALYTICS_RAW_DELIVERY: Final = True
