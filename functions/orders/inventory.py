"""Inventory: inventory queue (OrderCreated, OrderCancelled via SNS) -> reserve or release stock,
exactly once per order; not enough stock -> order REJECTED + OrderRejected (an outcome, not a retry).
Domain: ``orders.steps.handle_inventory_event``."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from orders.runtime import runtime
from orders.steps import handle_inventory_event
from relay.consumer import RecordContext, consume
from relay.envelope import Envelope
from relay.observability import logger as relay_logger

logger = relay_logger()


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    rt = runtime()

    def handle(envelope: Envelope, _ctx: RecordContext) -> None:
        handle_inventory_event(envelope, rt.orders, rt.inventory)

    return consume(event, context, handle, settings=rt.consumer_settings, sqs_client=rt.sqs)
