"""Analytics: analytics queue (every order event, RAW delivery: the SQS body is the envelope) -> one
S3 object per eventId. Domain: ``orders.archive``."""

from __future__ import annotations

from orders.archive import archive_event
from orders.settings import ANALYTICS
from orders.wiring import wiring
from relay.consumer import queue_handler

handler = queue_handler(
    wiring.checked(ANALYTICS),
    lambda w, envelope, _ctx: archive_event(envelope, s3_client=w.s3, bucket=w.analytics_bucket),
)
