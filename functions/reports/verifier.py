"""Verifier: verifier queue (ReportGenerated via SNS) -> read the report back from the public report
API -> one VERIFIED / MISMATCH / UNREACHABLE record. Domain: ``reports.verification``."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from relay.consumer import RecordContext, consume
from relay.envelope import Envelope
from relay.observability import logger as relay_logger
from reports.runtime import runtime
from reports.verification import verify_report

logger = relay_logger()


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    rt = runtime()

    def handle(envelope: Envelope, ctx: RecordContext) -> None:
        verify_report(envelope, ctx, rt.verification)

    return consume(event, context, handle, settings=rt.consumer_settings, sqs_client=rt.sqs)
