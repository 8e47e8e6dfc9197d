"""Snapshot worker: snapshot queue (ScoreSnapshotDue) -> one score snapshot per agent for that hour,
never two and never a changed one. Domain: ``scores.snapshots.take_snapshot``."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from relay.consumer import RecordContext, consume
from relay.envelope import Envelope
from relay.observability import logger as relay_logger
from scores.runtime import runtime
from scores.snapshots import take_snapshot

logger = relay_logger()


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    rt = runtime()

    def handle(envelope: Envelope, _ctx: RecordContext) -> None:
        take_snapshot(envelope, rt.worker_store)

    return consume(event, context, handle, settings=rt.consumer_settings, sqs_client=rt.consumer_sqs)
