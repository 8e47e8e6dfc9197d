"""Shipping: shipping queue (OrderPaid, routed by the app's EventBridge bus) -> one shipment from the
external shipping API, recorded on the order once. Domain: ``orders.shipping.ship_paid_order``."""

from __future__ import annotations

from orders.settings import SHIPPING
from orders.shipping import ship_paid_order
from orders.wiring import wiring
from relay.consumer import queue_handler

handler = queue_handler(
    wiring.checked(SHIPPING),
    lambda w, envelope, _ctx: ship_paid_order(envelope, w.orders, w.shipping, now=w.clock()),
)
