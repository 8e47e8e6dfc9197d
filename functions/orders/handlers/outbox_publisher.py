"""Outbox publisher: orders-table stream -> SNS ``order-events`` (kernel ``publish_outbox_batch``).

Only INSERTs of outbox rows are published, with the ``eventType`` message attribute that the
subscriptions' filter policies match (``orders.subscriptions``); order and orphan-payment
items on the same stream are ignored. A row is marked ``publishedAt`` after the
publish, so a crash in between publishes it again: every consumer dedupes on the stable eventId.
"""

from __future__ import annotations

from orders.settings import OUTBOX_PUBLISHER
from orders.wiring import wiring
from relay.outbox import outbox_handler

handler = outbox_handler(
    wiring.checked(OUTBOX_PUBLISHER),
    topic_arn=lambda w: w.settings.require("events_topic_arn"),
    table_name=lambda w: w.settings.require("orders_table"),
)
