"""Notifier: notifications queue (OrderCreated, OrderPaid, OrderRejected via SNS) -> customer
webhook, at most once per event. Domain: ``orders.notification``."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from orders.notification import notify_customer
from orders.runtime import runtime
from relay.consumer import RecordContext, consume
from relay.envelope import Envelope
from relay.observability import logger as relay_logger
from relay.side_effects import register_lambda_context

logger = relay_logger()


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    rt = runtime()
    # Lets Powertools expire an IN_PROGRESS record when this invocation times out.
    register_lambda_context(context)

    def handle(envelope: Envelope, _ctx: RecordContext) -> None:
        notify_customer(envelope, rt.notification)

    return consume(event, context, handle, settings=rt.consumer_settings, sqs_client=rt.sqs)
