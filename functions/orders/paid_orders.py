"""Paid orders: paid-orders queue (payments' PaymentCompleted via SNS) -> order PAID + OrderPaid,
once; a payment that cannot be applied is recorded as an orphan and alarmed, never retried forever.
Domain: ``orders.steps.mark_paid``."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from orders.runtime import runtime
from orders.steps import mark_paid
from relay.consumer import RecordContext, consume
from relay.envelope import Envelope
from relay.observability import logger as relay_logger

logger = relay_logger()


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    rt = runtime()

    def handle(envelope: Envelope, _ctx: RecordContext) -> None:
        mark_paid(envelope, rt.orders)

    return consume(event, context, handle, settings=rt.consumer_settings, sqs_client=rt.sqs)
