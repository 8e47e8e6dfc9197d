"""Canonical Powertools consumer (bench only): batch processor + idempotent_function + a separate
business write -- the pattern the kernel replaces."""

import json
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)

TABLE = "bench-table"
logger = Logger()
metrics = Metrics(namespace="Bench")
processor = BatchProcessor(event_type=EventType.SQS)
persistence = DynamoDBPersistenceLayer(table_name=TABLE, key_attr="id", expiry_attr="expiresAt")
config = IdempotencyConfig(event_key_jmespath="eventId", payload_validation_jmespath="payload")
ddb = boto3.client("dynamodb")


@idempotent_function(  # type: ignore[untyped-decorator]
    data_keyword_argument="event", persistence_store=persistence, config=config
)
def apply_payment(event: dict[str, Any]) -> dict[str, Any]:
    ddb.update_item(
        TableName=TABLE,
        Key={"id": {"S": f"account#{event['ids']['accountId']}"}},
        UpdateExpression="ADD balance :a",
        ExpressionAttributeValues={":a": {"N": "1"}},
    )
    return {"ok": True}


def record_handler(record: Any) -> None:
    apply_payment(event=json.loads(record.body))


@logger.inject_lambda_context
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return dict(
        process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )
    )
