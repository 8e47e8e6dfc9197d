"""Outbox publisher: operations-table stream -> SNS ``payment-events`` (kernel ``publish_outbox_batch``).

Only INSERTs of outbox rows are published (with the ``eventType`` message attribute the
subscriptions filter on); operation items on the same stream are ignored. A row is marked
``publishedAt`` after the publish, so a crash in between publishes it again: consumers dedupe on the
stable eventId.

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
from payments.wiring import wiring
from relay.outbox import outbox_handler

handler = outbox_handler(
    wiring.checked(OUTBOX_PUBLISHER),
    topic_arn=lambda w: w.settings.require("events_topic_arn"),
    table_name=lambda w: w.settings.require("operations_table"),
)
