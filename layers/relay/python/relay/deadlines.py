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

Two indexes, one of them legacy:

* ``due`` (``dueShard``/``dueAt``, projection KEYS_ONLY): an item enters it once (when it is created)
  and leaves it once (when it ended and its last events are published). DynamoDB writes an index
  entry only when the item's index keys or projected attributes change, and a KEYS_ONLY entry holds
  nothing a step changes, so the steps in between cost the index nothing: at most 2 index writes per
  item in all, plus 2 each time a step that runs long re-arms its deadline.
* ``by-deadline`` (``deadlineShard``/``deadlineAt``, projection ALL): the layout before, where every
  write of an open item re-wrote its index entry. Items written then are still found there (and leave
  it at their next write); a table keeps it until it is empty, then a later deploy removes it (one
  GSI change per deploy). ``overdue`` reads both.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from relay.idempotency import deserialize_item

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

INDEX_NAME = "due"
SHARD_ATTRIBUTE = "dueShard"
AT_ATTRIBUTE = "dueAt"
ATTRIBUTES = (SHARD_ATTRIBUTE, AT_ATTRIBUTE)
LEGACY_INDEX_NAME = "by-deadline"
LEGACY_SHARD_ATTRIBUTE = "deadlineShard"
LEGACY_AT_ATTRIBUTE = "deadlineAt"
LEGACY_ATTRIBUTES = (LEGACY_SHARD_ATTRIBUTE, LEGACY_AT_ATTRIBUTE)
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


def deadline_of(item: dict[str, Any]) -> int | None:
    """An item's deadline (epoch seconds) in either index, or None when it is in neither."""
    for name in (AT_ATTRIBUTE, LEGACY_AT_ATTRIBUTE):
        if item.get(name) is not None:
            return int(item[name])
    return None


def overdue(
    ddb: DynamoDBClient,
    table_name: str,
    now: datetime,
    *,
    limit: int | None = None,
    legacy: bool = True,
) -> Iterator[dict[str, Any]]:
    """The key (and, from the legacy index, the whole item) of every item of ``table_name`` whose
    deadline is at or before ``now``, oldest deadline first per shard, the ``due`` index first, at most
    ``limit`` in all (the rest are found by the next sweep). The indexes are eventually consistent:
    re-read an item consistently before acting on it."""
    found = 0
    indexes = [(INDEX_NAME, SHARD_ATTRIBUTE, AT_ATTRIBUTE)]
    if legacy:
        indexes.append((LEGACY_INDEX_NAME, LEGACY_SHARD_ATTRIBUTE, LEGACY_AT_ATTRIBUTE))
    for index_name, shard_attribute, at_attribute in indexes:
        for item in _overdue_in(ddb, table_name, now, index_name, shard_attribute, at_attribute):
            if limit is not None and found >= limit:
                return
            found += 1
            yield item


def _overdue_in(
    ddb: DynamoDBClient,
    table_name: str,
    now: datetime,
    index_name: str,
    shard_attribute: str,
    at_attribute: str,
) -> Iterator[dict[str, Any]]:
    for shard in all_shards():
        start: dict[str, Any] | None = None
        while True:
            params: dict[str, Any] = {
                "TableName": table_name,
                "IndexName": index_name,
                "KeyConditionExpression": "#s = :s AND #at <= :now",
                "ExpressionAttributeNames": {"#s": shard_attribute, "#at": at_attribute},
                "ExpressionAttributeValues": {":s": {"S": shard}, ":now": {"N": str(epoch(now))}},
            }
            if start:
                params["ExclusiveStartKey"] = start
            page = ddb.query(**params)
            for raw in page.get("Items", []):
                yield deserialize_item(raw)
            start = page.get("LastEvaluatedKey")
            if not start:
                break
