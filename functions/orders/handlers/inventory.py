"""Inventory: inventory queue (OrderCreated, OrderCancelled via SNS) -> reserve or release stock,
exactly once per order; not enough stock -> order REJECTED + OrderRejected (an outcome, not a retry).
Domain: ``orders.fulfilment.INVENTORY_STEPS``."""

from __future__ import annotations

from orders import fulfilment
from orders.settings import INVENTORY
from orders.wiring import wiring
from relay.consumer import queue_handler

handler = queue_handler(
    wiring.checked(INVENTORY),
    lambda w, envelope, _ctx: fulfilment.INVENTORY_STEPS(envelope, w.orders, w.inventory, now=w.clock()),
)
