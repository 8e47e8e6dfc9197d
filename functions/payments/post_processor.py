"""Post-processor: post-processing queue (PaymentCompleted via SNS) -> invoice input in S3 ->
INVOICE_PENDING + InvoiceRequested. Domain: ``payments.steps.post_process``."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from payments.runtime import runtime
from payments.steps import post_process
from relay.consumer import RecordContext, consume
from relay.envelope import Envelope
from relay.observability import logger as relay_logger

logger = relay_logger()


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    rt = runtime()

    def handle(envelope: Envelope, ctx: RecordContext) -> None:
        post_process(envelope, ctx, rt)

    return consume(event, context, handle, settings=rt.consumer_settings, sqs_client=rt.sqs)
