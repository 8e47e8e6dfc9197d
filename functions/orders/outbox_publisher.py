"""Outbox publisher: orders-table stream -> SNS ``order-events`` (kernel ``publish_outbox_batch``).

Only INSERTs of outbox rows are published, with the ``eventType`` message attribute that the
subscriptions' filter policies match (``orders.subscriptions``); order and orphan-payment
items on the same stream are ignored. A row is marked ``publishedAt`` after the
publish, so a crash in between publishes it again: every consumer dedupes on the stable eventId.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from orders.runtime import runtime
from relay.observability import logger as relay_logger
from relay.outbox import publish_outbox_batch

logger = relay_logger()


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    rt = runtime()
    return publish_outbox_batch(
        event,
        topic_arn=rt.settings.require("events_topic_arn"),
        sns_client=rt.sns,
        ddb_client=rt.ddb,
        table_name=rt.settings.require("orders_table"),
    )
