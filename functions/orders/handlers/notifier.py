"""Notifier: notifications queue (OrderCreated, OrderPaid, OrderRejected via SNS) -> customer
webhook, at most once per event. Domain: ``orders.notification``."""

from __future__ import annotations

from orders.notification import notify_customer
from orders.settings import NOTIFIER
from orders.wiring import wiring
from relay.consumer import queue_handler

handler = queue_handler(
    wiring.checked(NOTIFIER), lambda w, envelope, _ctx: notify_customer(envelope, w.notification)
)
