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

from typing import Final

PAYMENT_REQUESTED: Final = "PaymentRequested"
PAYMENT_STATUS_CHECK_DUE: Final = "PaymentStatusCheckDue"  # sent by the payment worker to itself, no SNS
PAYMENT_COMPLETED: Final = "PaymentCompleted"
PAYMENT_FAILED: Final = "PaymentFailed"
INVOICE_REQUESTED: Final = "InvoiceRequested"
OPERATION_COMPLETED: Final = "OperationCompleted"

PAYMENT_REQUESTS_FILTER: Final[dict[str, list[str]]] = {"eventType": [PAYMENT_REQUESTED]}
POST_PROCESSING_FILTER: Final[dict[str, list[str]]] = {"eventType": [PAYMENT_COMPLETED]}
INVOICE_REQUESTS_FILTER: Final[dict[str, list[str]]] = {"eventType": [INVOICE_REQUESTED]}
RAW_DELIVERY: Final = False
