"""Analytics: analytics queue (every order event, RAW delivery: the SQS body is the envelope) -> one
S3 object per eventId. Domain: ``orders.archive``."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from orders.archive import archive_event
from orders.runtime import runtime
from relay.consumer import RecordContext, consume
from relay.envelope import Envelope
from relay.observability import logger as relay_logger

logger = relay_logger()


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    rt = runtime()

    def handle(envelope: Envelope, _ctx: RecordContext) -> None:
        archive_event(envelope, s3_client=rt.s3, bucket=rt.analytics_bucket)

    return consume(event, context, handle, settings=rt.consumer_settings, sqs_client=rt.sqs)
