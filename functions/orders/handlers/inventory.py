"""Inventory: inventory queue (OrderCreated, OrderCancelled via SNS) -> reserve or release stock,
exactly once per order; not enough stock -> order REJECTED + OrderRejected (an outcome, not a retry).
Domain: ``orders.fulfilment.handle_inventory_event``."""

from __future__ import annotations

from orders.fulfilment import handle_inventory_event
from orders.settings import INVENTORY
from orders.wiring import wiring
from relay.consumer import queue_handler

handler = queue_handler(
    wiring.checked(INVENTORY),
    lambda w, envelope, _ctx: handle_inventory_event(envelope, w.orders, w.inventory, now=w.clock()),
)
