"""The parked ledger from the operator's side (``relay.ledger`` writes it): a redrive marks what it moved.

* a message moved by hand (the first batch, ``--filter``) is marked by its key: the source queue and
  the original messageId the kernel put in ``relay.originalMessageId``;
* what SQS's move task moved is not named one by one by SQS, so when the task COMPLETED every entry of
  the source queue still ``PARKED`` and parked before the task started is marked: the task moves every
  message that was in the DLQ when it started. An entry whose message left the DLQ otherwise (expired
  after the DLQ's retention, deleted by hand) is marked too -- the mark says "no longer parked".

Marks are conditional on the entry being ``PARKED``, so marking twice is harmless.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ops.app import App


def _table(app: App) -> str:
    return app.name("core", "parked-ledger")


def _mark(app: App, key: dict[str, str], *, reason: str, at: str) -> bool:
    try:
        app.client("dynamodb").update_item(
            TableName=_table(app),
            Key={name: {"S": value} for name, value in key.items()},
            UpdateExpression="SET #s = :redriven, redrivenAt = :at, redriveReason = :why",
            ConditionExpression="#s = :parked",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={
                ":redriven": {"S": "REDRIVEN"},
                ":parked": {"S": "PARKED"},
                ":at": {"S": at},
                ":why": {"S": reason[:1000]},
            },
        )
    except Exception as exc:
        code = getattr(exc, "response", {}).get("Error", {}).get("Code")
        if code in ("ConditionalCheckFailedException", "ResourceNotFoundException"):
            return False  # not parked (any more), or no ledger in this stage
        raise
    return True


def mark_moved(app: App, source_queue: str, message_ids: Iterable[str], *, reason: str) -> int:
    """Mark the entries of messages moved by hand; returns how many were marked."""
    from relay.ledger import ledger_key

    at = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    return sum(_mark(app, ledger_key(source_queue, mid), reason=reason, at=at) for mid in message_ids if mid)


def mark_parked_before(app: App, source_queue: str, before: datetime, *, reason: str) -> int:
    """Mark every entry of ``source_queue`` still PARKED and parked before ``before``."""
    from relay.ledger import queue_name

    ddb = app.client("dynamodb")
    cutoff = before.isoformat().replace("+00:00", "Z")
    at = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    params: dict[str, Any] = {
        "TableName": _table(app),
        "KeyConditionExpression": "pk = :pk",
        "FilterExpression": "#s = :parked AND parkedAt <= :cutoff",
        "ExpressionAttributeNames": {"#s": "status"},
        "ExpressionAttributeValues": {
            ":pk": {"S": f"PARKED#{queue_name(source_queue)}"},
            ":parked": {"S": "PARKED"},
            ":cutoff": {"S": cutoff},
        },
        "ProjectionExpression": "pk, sk",
    }
    marked = 0
    while True:
        try:
            page = ddb.query(**params)
        except Exception as exc:
            if getattr(exc, "response", {}).get("Error", {}).get("Code") == "ResourceNotFoundException":
                return 0
            raise
        for item in page.get("Items", []):
            marked += _mark(app, {"pk": item["pk"]["S"], "sk": item["sk"]["S"]}, reason=reason, at=at)
        if not page.get("LastEvaluatedKey"):
            return marked
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def entries_of_queue(app: App, source_queue: str, *, limit: int = 200) -> list[dict[str, Any]]:
    """The ledger's entries for messages parked from ``source_queue`` (a name, URL or ARN), newest
    first, PARKED and REDRIVEN alike: what a DLQ holds and why, read without a receive (one Query on
    the queue's partition)."""
    from relay.ddb import deserialize_item
    from relay.ledger import queue_name

    ddb = app.client("dynamodb")
    params: dict[str, Any] = {
        "TableName": _table(app),
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": {"S": f"PARKED#{queue_name(source_queue)}"}},
    }
    rows: list[dict[str, Any]] = []
    while True:
        try:
            page = ddb.query(**params)
        except Exception as exc:
            if getattr(exc, "response", {}).get("Error", {}).get("Code") == "ResourceNotFoundException":
                return []
            raise
        rows.extend(deserialize_item(item) for item in page.get("Items", []))
        if not page.get("LastEvaluatedKey"):
            break
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    rows.sort(key=lambda r: str(r.get("parkedAt") or ""), reverse=True)
    return rows[:limit]
