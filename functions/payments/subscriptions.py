"""The fan-out contract of ``payment-events``: the event types payments publishes, and which of its
queues hears which.

The payments stack builds its SNS subscriptions from these constants and the steps name the same
types, so a filter cannot drift from what a consumer handles. Standard library only: the CDK app
imports this module without the Lambda runtime's dependencies.

Filter policies match the ``eventType`` MESSAGE ATTRIBUTE that the kernel's outbox publisher sets. The
delivery is ENVELOPED (raw delivery off): the SNS notification keeps the topic ARN, MessageId and
timestamp for tracing, and the attributes stay readable past SQS's 10-attribute limit for raw delivery.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

PAYMENT_REQUESTED: Final = "PaymentRequested"
PAYMENT_STATUS_CHECK_DUE: Final = "PaymentStatusCheckDue"  # sent by the payment worker to itself, no SNS
# Asks the legacy system by the payment's key: sent by the worker to itself (its chain of checks), or
# published through the outbox when the sweeper finds a payment step past its budget.
PAYMENT_RECONCILIATION_DUE: Final = "PaymentReconciliationDue"
PAYMENT_COMPLETED: Final = "PaymentCompleted"
PAYMENT_FAILED: Final = "PaymentFailed"
PAYMENT_UNRESOLVED: Final = "PaymentUnresolved"
INVOICE_REQUESTED: Final = "InvoiceRequested"
INVOICE_FAILED: Final = "InvoiceFailed"
OPERATION_COMPLETED: Final = "OperationCompleted"
OPERATION_CANCELLED: Final = "OperationCancelled"  # the client cancelled a PENDING operation
# The sweeper's re-drive of a step whose message is gone (parked, expired, deleted): one type per
# step so that it reaches that step's queue only, never another service's subscription.
PAYMENT_REDRIVE_DUE: Final = "PaymentRedriveDue"
POST_PROCESSING_REDRIVE_DUE: Final = "PostProcessingRedriveDue"
INVOICE_REDRIVE_DUE: Final = "InvoiceRedriveDue"

PAYMENT_REQUESTS_FILTER: Final[dict[str, list[str]]] = {
    "eventType": [PAYMENT_REQUESTED, PAYMENT_REDRIVE_DUE, PAYMENT_RECONCILIATION_DUE]
}
POST_PROCESSING_FILTER: Final[dict[str, list[str]]] = {
    "eventType": [PAYMENT_COMPLETED, POST_PROCESSING_REDRIVE_DUE]
}
INVOICE_REQUESTS_FILTER: Final[dict[str, list[str]]] = {"eventType": [INVOICE_REQUESTED, INVOICE_REDRIVE_DUE]}
# Every terminal state's event: the notice sender tells the client's callback URL (payments.notices).
NOTICE_EVENTS: Final = (
    OPERATION_COMPLETED,
    PAYMENT_FAILED,
    PAYMENT_UNRESOLVED,
    INVOICE_FAILED,
    OPERATION_CANCELLED,
)
# Only the operations that gave a callbackUrl: the publisher sets ``notice`` on their terminal events
# (``message_attributes``), so the others never reach the notices queue, its poll or its function.
NOTICE_ATTRIBUTE: Final = "notice"
NOTICE_WANTED: Final = "yes"
NOTICES_FILTER: Final[dict[str, list[str]]] = {
    "eventType": list(NOTICE_EVENTS),
    NOTICE_ATTRIBUTE: [NOTICE_WANTED],
}
# Only the outcomes of a payment for an order reach orders: the publisher sets ``order`` on these events
# ("yes" when the envelope's ids name an orderId), and orders' subscriptions filter on it
# (``orders.subscriptions``), so a payment without an order never polls or invokes orders' functions.
ORDER_ATTRIBUTE: Final = "order"
ORDER_EVENTS: Final = (PAYMENT_COMPLETED, PAYMENT_FAILED, OPERATION_CANCELLED)
# The sweeper's schedule puts this (an envelope) on the sweeps queue.
SWEEP_DUE: Final = "SweepDue"
RAW_DELIVERY: Final = False


def message_attributes(envelope: Any, item: Mapping[str, Any]) -> dict[str, str]:
    """Payments' own message attributes for an event (``relay.outbox.MessageAttributes``): ``notice``
    on a terminal event, "yes" when the operation asked for one (its item has a ``callbackUrl``); and
    ``order`` on a payment's outcome, "yes" when it is for an order.

    ``ops migrate`` publishes an outbox row of the layout before with these too: the row does not hold
    the operation, so its terminal event gets "yes", and the notice sender, which reads the operation,
    sends nothing without a URL. The envelope always names its orderId (``ids``), a row's too."""
    attributes: dict[str, str] = {}
    if envelope.event_type in NOTICE_EVENTS:
        row = item.get("kind") == "outbox"
        attributes[NOTICE_ATTRIBUTE] = NOTICE_WANTED if row or item.get("callbackUrl") else "no"
    if envelope.event_type in ORDER_EVENTS:
        attributes[ORDER_ATTRIBUTE] = "yes" if envelope.ids.get("orderId") else "no"
    return attributes
