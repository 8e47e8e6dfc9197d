"""Outbox publisher: operations-table stream -> SNS ``payment-events`` (kernel ``publish_outbox_batch``).

The events an operation write put into the item (``ev``: in the record's NEW image and not in its
OLD one) are published with the ``eventType`` message attribute the subscriptions filter on (and
``notice`` on a terminal event: ``payments.subscriptions.message_attributes``); an ended
operation then leaves the deadline index. A crash in between publishes again: consumers dedupe on
the stable eventId.

Delivery to the payment-requests, post-processing and invoice-requests queues is ENVELOPED (raw
message delivery off), on purpose:

* the SNS notification keeps the topic ARN, the SNS MessageId and the publish timestamp next to our
  envelope, which is what an operator needs when tracing a message parked in a DLQ back to its
  publish (which topic, when, which SNS message);
* the message attributes (eventType, correlationId) stay inside the body, so they survive a DLQ
  redrive and the ops tooling shows them without receiving SQS attributes;
* the payment worker's queue also receives PaymentStatusCheckDue messages sent directly (no SNS),
  and the kernel's unwrap tells the two routes apart either way.

The cost is ~1 KB per message and one more JSON parse; at these volumes that is nothing. Raw
delivery is the better choice for high-volume analytics-style consumers (orders does that).
"""

from __future__ import annotations

from payments.settings import OUTBOX_PUBLISHER
from payments.subscriptions import message_attributes
from payments.wiring import wiring
from relay.outbox import outbox_handler

handler = outbox_handler(
    wiring.checked(OUTBOX_PUBLISHER),
    topic_arn=lambda w: w.settings.require("events_topic_arn"),
    table_name=lambda w: w.settings.require("operations_table"),
    attributes=message_attributes,
)
