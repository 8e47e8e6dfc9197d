"""Payment worker: payment-requests queue (PaymentRequested via SNS, and its own delayed
PaymentStatusCheckDue messages) -> legacy payment system. Domain: ``payments.steps.process_payment``."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from payments.runtime import runtime
from payments.steps import process_payment
from relay.consumer import RecordContext, consume
from relay.envelope import Envelope
from relay.observability import logger as relay_logger

logger = relay_logger()


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    rt = runtime()

    def handle(envelope: Envelope, ctx: RecordContext) -> None:
        process_payment(envelope, ctx, rt)

    return consume(event, context, handle, settings=rt.consumer_settings, sqs_client=rt.sqs)
