"""Invoice worker: invoice-requests queue (InvoiceRequested via SNS) -> invoice API (once) ->
COMPLETED + OperationCompleted. Domain: ``payments.steps.issue_invoice``."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from payments.runtime import runtime
from payments.steps import issue_invoice
from relay.consumer import RecordContext, consume
from relay.envelope import Envelope
from relay.observability import logger as relay_logger
from relay.side_effects import register_lambda_context

logger = relay_logger()


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    rt = runtime()
    # Lets Powertools expire an IN_PROGRESS invoice record when this invocation times out.
    register_lambda_context(context)

    def handle(envelope: Envelope, ctx: RecordContext) -> None:
        issue_invoice(envelope, ctx, rt)

    return consume(event, context, handle, settings=rt.consumer_settings, sqs_client=rt.sqs)
