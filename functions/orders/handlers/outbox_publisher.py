"""Outbox publisher: orders-table stream -> SNS ``order-events`` and, for the integration events
(``orders.subscriptions.BUS_EVENT_TYPES``), the app's EventBridge bus (kernel ``publish_outbox_batch``).

Only INSERTs of outbox rows are published, with the ``eventType`` message attribute that the
subscriptions' filter policies match (``orders.subscriptions``); order and orphan-payment
items on the same stream are ignored. A row is marked ``publishedAt`` after both
publishes, so a crash in between publishes it again: every consumer dedupes on the stable eventId.
"""

from __future__ import annotations

from orders.settings import OUTBOX_PUBLISHER
from orders.subscriptions import BUS_EVENT_TYPES, ORDERS_SOURCE
from orders.wiring import wiring
from relay.outbox import BusRoute, outbox_handler

handler = outbox_handler(
    wiring.checked(OUTBOX_PUBLISHER),
    topic_arn=lambda w: w.settings.require("events_topic_arn"),
    table_name=lambda w: w.settings.require("orders_table"),
    bus=lambda w: BusRoute(w.settings.require("event_bus_name"), ORDERS_SOURCE, frozenset(BUS_EVENT_TYPES)),
)
