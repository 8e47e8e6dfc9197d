"""Deadlines: a SPARSE index of the items that still owe something, by when they owe it.

An item that is not done yet (a non-terminal operation, an outbox row not yet published) carries two
attributes: ``deadlineShard`` (one of ``SHARDS`` fixed partition values, from a hash of its id) and
``deadlineAt`` (epoch seconds: by then it should have moved on). A global secondary index keyed on
them (``INDEX_NAME``, projection ALL) holds ONLY those items -- DynamoDB indexes an item only when it
has the index's key attributes -- so a sweeper finds what is overdue with one Query per shard
(``deadlineShard = :s AND deadlineAt <= :now``), never a scan, and the index stays as small as the
work in flight. An item leaves the index when the writer that finishes it REMOVEs both attributes.

The shards spread the index's write traffic over several partitions; their number is part of the
stored data (a new count needs a backfill), hence a constant here and not configuration.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from relay.idempotency import deserialize_item

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

INDEX_NAME = "by-deadline"
SHARD_ATTRIBUTE = "deadlineShard"
AT_ATTRIBUTE = "deadlineAt"
ATTRIBUTES = (SHARD_ATTRIBUTE, AT_ATTRIBUTE)
SHARDS = 4


def shard_of(item_id: str) -> str:
    """The shard an item's id belongs to (stable: sha256, not Python's randomized ``hash``)."""
    return f"open#{int(hashlib.sha256(item_id.encode()).hexdigest()[:8], 16) % SHARDS}"


def all_shards() -> list[str]:
    return [f"open#{n}" for n in range(SHARDS)]


def epoch(moment: datetime) -> int:
    return int(moment.timestamp())


def deadline_attributes(item_id: str, at: datetime) -> dict[str, Any]:
    """The two index attributes for an item that owes something by ``at``."""
    return {SHARD_ATTRIBUTE: shard_of(item_id), AT_ATTRIBUTE: epoch(at)}


def overdue(
    ddb: DynamoDBClient, table_name: str, now: datetime, *, limit: int | None = None
) -> Iterator[dict[str, Any]]:
    """Every item of ``table_name`` whose deadline is at or before ``now``, oldest deadline first per
    shard, at most ``limit`` in all (the rest are found by the next sweep). The index is eventually
    consistent: re-read an item consistently before acting on it."""
    found = 0
    for shard in all_shards():
        start: dict[str, Any] | None = None
        while True:
            params: dict[str, Any] = {
                "TableName": table_name,
                "IndexName": INDEX_NAME,
                "KeyConditionExpression": "#s = :s AND #at <= :now",
                "ExpressionAttributeNames": {"#s": SHARD_ATTRIBUTE, "#at": AT_ATTRIBUTE},
                "ExpressionAttributeValues": {":s": {"S": shard}, ":now": {"N": str(epoch(now))}},
            }
            if start:
                params["ExclusiveStartKey"] = start
            page = ddb.query(**params)
            for raw in page.get("Items", []):
                if limit is not None and found >= limit:
                    return
                found += 1
                yield deserialize_item(raw)
            start = page.get("LastEvaluatedKey")
            if not start:
                break
