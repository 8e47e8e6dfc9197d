"""Points: points queue (OrderPaid and paid orders' OrderRejected, routed by the app's EventBridge bus)
-> the customer's points accrued or reversed, once per order. Domain: ``loyalty.points``."""

from __future__ import annotations

from loyalty.points import POINTS_STEPS
from loyalty.settings import POINTS
from loyalty.wiring import wiring
from relay.consumer import queue_handler

handler = queue_handler(
    wiring.checked(POINTS),
    lambda w, envelope, _ctx: POINTS_STEPS(envelope, w),
)
