"""Outbox publisher: orders-table stream -> SNS ``order-events`` and, for the integration events
(``orders.subscriptions.BUS_EVENT_TYPES``), the app's EventBridge bus (kernel ``publish_outbox_batch``).

The events an order write put into the item (``ev``: in the record's NEW image and not in its OLD
one) are published with the ``eventType`` message attribute that the subscriptions' filter policies
match (``orders.subscriptions``). A crash in between publishes again: every consumer dedupes on the
stable eventId. A batch given up after the stream's retries is re-published from the items
with ``python -m ops republish-order ID --reason …`` (orders have no sweeper).
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
