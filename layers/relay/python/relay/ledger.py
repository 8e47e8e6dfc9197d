"""The parked ledger: one record per parked message, written by the kernel when it parks.

Receiving from a DLQ changes receive counts and hides messages; the ledger answers "where is X's
message, and why?" without a receive. When the consumer parks a record (``relay.consumer``), it also
puts ``{pk: PARKED#<source queue name>, sk: <original messageId>}`` into the app's ledger table
(``RELAY_PARKED_LEDGER_TABLE``, from the core stack), conditionally on its absence, so parking the
same delivery twice (a crash after the DLQ send) records it once. The item holds the eventId,
eventType, business ids, error class and message, the DLQ and the time; ``entity`` (e.g.
``operationId#<id>``, the first of ``ENTITY_IDS`` the event names) keys the GSI ``by-entity``, so the
parked messages of one operation or order are one Query. ``ops dlq redrive`` marks entries it moved
``REDRIVEN``. Entries expire (``expiresAt``) after ``RETENTION_DAYS``, longer than a DLQ keeps a message.

The DLQ send comes first: a message is safe once parked, so a failed ledger write is logged and
counted (``LedgerWriteFailed``), never a reason to park again.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from relay.ddb import serialize_item

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

ENTITY_INDEX = "by-entity"
ENTITY_IDS = ("operationId", "orderId", "reportId", "paymentId", "snapshotHour")
RETENTION_DAYS = 30
PARKED = "PARKED"
REDRIVEN = "REDRIVEN"


def queue_name(url_or_arn: str) -> str:
    return url_or_arn.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]


def ledger_key(source_queue: str, message_id: str) -> dict[str, str]:
    return {"pk": f"PARKED#{queue_name(source_queue)}", "sk": message_id}


def entity_of(ids: Mapping[str, str]) -> str | None:
    """The entity a parked message belongs to, for the ``by-entity`` index."""
    for name in ENTITY_IDS:
        if ids.get(name):
            return f"{name}#{ids[name]}"
    return None


def already_parked(ddb: DynamoDBClient, table_name: str, *, source_queue_url: str, message_id: str) -> bool:
    """Whether this delivery (source queue and SQS messageId) was parked before: a poison message
    delivered twice (SQS at-least-once, or a batch whose delete was lost) is parked once."""
    item = ddb.get_item(
        TableName=table_name,
        Key=serialize_item(ledger_key(source_queue_url, message_id)),
        ConsistentRead=True,
        ProjectionExpression="sk",
    ).get("Item")
    return item is not None


def record_parking(
    ddb: DynamoDBClient,
    table_name: str,
    *,
    source_queue_url: str,
    dlq_url: str,
    message_id: str,
    dlq_message_id: str | None,
    error: BaseException,
    event_id: str | None,
    event_type: str | None,
    ids: Mapping[str, str],
    correlation_id: str | None,
    now: datetime | None = None,
) -> bool:
    """Record one parking; False when it was already recorded."""
    moment = now or datetime.now(UTC)
    item: dict[str, Any] = {
        **ledger_key(source_queue_url, message_id),
        "kind": "parked",
        "status": PARKED,
        "sourceQueue": queue_name(source_queue_url),
        "dlq": queue_name(dlq_url),
        "messageId": message_id,
        "errorClass": type(error).__name__,
        "errorMessage": (str(error) or type(error).__name__)[:1000],
        "parkedAt": moment.isoformat().replace("+00:00", "Z"),
        "expiresAt": int((moment + timedelta(days=RETENTION_DAYS)).timestamp()),
    }
    optional = {
        "dlqMessageId": dlq_message_id,
        "eventId": event_id,
        "eventType": event_type,
        "correlationId": correlation_id,
        "entity": entity_of(ids),
    }
    item.update({name: value for name, value in optional.items() if value})
    if ids:
        item["ids"] = dict(ids)
    try:
        ddb.put_item(
            TableName=table_name,
            Item=serialize_item(item),
            ConditionExpression="attribute_not_exists(pk)",
        )
    except Exception as exc:
        if getattr(exc, "response", {}).get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            return False
        raise
    return True
