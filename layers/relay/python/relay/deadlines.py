"""Deadlines: a SPARSE index of the items that still owe something, by when they owe it.

An item that is not done yet (a non-terminal operation, or one that ended with events still to
publish) carries two attributes: ``dueShard`` (one of a stage's shard values, ``open#0`` ..
``open#<count - 1>``, from a hash of its id) and ``dueAt`` (epoch seconds: by then it should have
moved on). The global secondary index ``due`` keyed on them (projection KEYS_ONLY) holds ONLY those
items -- DynamoDB indexes an item only when it has the index's key attributes -- so a sweeper finds
what is overdue with one Query per shard (``dueShard = :s AND dueAt <= :now``), never a scan, and
reads each item it finds consistently before acting on it. An item enters the index once (its creating
write sets both attributes) and leaves it once: when it ended and the stream publisher has published
its last events, ``relay.outbox.settle_item`` REMOVEs both. A KEYS_ONLY entry holds nothing a step
changes, so the steps in between cost the index nothing: at most 2 index writes per item in all, plus
2 each time a step that runs long re-arms its deadline (a new ``dueAt``).

The shards spread the index's write traffic over several partitions: each shard value is one index
partition, good for 1,000 write units a second. The count is stage configuration
(``payments.deadline_shards``, ``DEFAULT_SHARDS``: 10,000 payments a second put 20,000 WU/s on the
index, 313 per shard, under a third of a partition). It can change on a live table, because a reader
reads ``max(count, read_count)`` shards and shard ``open#n`` means the same under every count:

* **more shards**: deploy the new count. Writers hash into it; the sweeper reads it, which includes
  every shard of the smaller count, so the items written before are still found (and leave the index
  as they end). Nothing to backfill.
* **fewer shards**: deploy the new count with ``deadline_read_shards`` = the old one (write the new
  count, read both); ``rebalance`` moves every item still in a shard at or above the new count
  (``python -m ops deadlines --rebalance``); then deploy without ``deadline_read_shards``.

The table still has the index of the layout before one write per step (``by-deadline``), empty once
``ops migrate`` moved its items to ``due``; a later deploy removes it (one GSI change per deploy).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from relay.ddb import deserialize_item

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

INDEX_NAME = "due"
SHARD_ATTRIBUTE = "dueShard"
AT_ATTRIBUTE = "dueAt"
ATTRIBUTES = (SHARD_ATTRIBUTE, AT_ATTRIBUTE)
DEFAULT_SHARDS = 64
_PREFIX = "open#"


def shard_of(item_id: str, count: int = DEFAULT_SHARDS) -> str:
    """The shard an item's id belongs to (stable: sha256, not Python's randomized ``hash``)."""
    return f"{_PREFIX}{int(hashlib.sha256(item_id.encode()).hexdigest()[:8], 16) % count}"


def all_shards(count: int = DEFAULT_SHARDS) -> list[str]:
    return [f"{_PREFIX}{n}" for n in range(count)]


def shard_number(shard: str) -> int:
    return int(shard.removeprefix(_PREFIX))


def epoch(moment: datetime) -> int:
    return int(moment.timestamp())


def deadline_attributes(item_id: str, at: datetime, shards: int = DEFAULT_SHARDS) -> dict[str, Any]:
    """The two index attributes for an item that owes something by ``at`` (``shards``: the stage's count)."""
    return {SHARD_ATTRIBUTE: shard_of(item_id, shards), AT_ATTRIBUTE: epoch(at)}


def deadline_of(item: dict[str, Any]) -> int | None:
    """An item's deadline (epoch seconds), or None when it is not in the index."""
    return int(item[AT_ATTRIBUTE]) if item.get(AT_ATTRIBUTE) is not None else None


def overdue(
    ddb: DynamoDBClient,
    table_name: str,
    now: datetime,
    *,
    limit: int | None = None,
    shards: int = DEFAULT_SHARDS,
) -> Iterator[dict[str, Any]]:
    """The key of every item of ``table_name`` whose deadline is at or before ``now``, oldest deadline
    first per shard, at most ``limit`` in all (the rest are found by the next sweep). ``shards``: how
    many shards to read (the larger of the stage's count and its read count). The index is eventually
    consistent: re-read an item consistently before acting on it."""
    found = 0
    for shard in all_shards(shards):
        for item in _in_shard(ddb, table_name, shard, epoch(now)):
            if limit is not None and found >= limit:
                return
            found += 1
            yield item


def _in_shard(ddb: DynamoDBClient, table_name: str, shard: str, until: int) -> Iterator[dict[str, Any]]:
    start: dict[str, Any] | None = None
    while True:
        params: dict[str, Any] = {
            "TableName": table_name,
            "IndexName": INDEX_NAME,
            "KeyConditionExpression": "#s = :s AND #at <= :now",
            "ExpressionAttributeNames": {"#s": SHARD_ATTRIBUTE, "#at": AT_ATTRIBUTE},
            "ExpressionAttributeValues": {":s": {"S": shard}, ":now": {"N": str(until)}},
        }
        if start:
            params["ExclusiveStartKey"] = start
        page = ddb.query(**params)
        for raw in page.get("Items", []):
            yield deserialize_item(raw)
        start = page.get("LastEvaluatedKey")
        if not start:
            return


_ALWAYS = 2**53  # a deadline no item has: every item of a shard is "due" by then


def _items_of(ddb: DynamoDBClient, table_name: str, shard: str) -> Iterator[dict[str, Any]]:
    return _in_shard(ddb, table_name, shard, _ALWAYS)


def rebalance(ddb: DynamoDBClient, table_name: str, *, shards: int, read_shards: int) -> int:
    """Move every item of the ``due`` index that sits in a shard at or above ``shards`` (up to
    ``read_shards``) into one below it: the backfill of a change to fewer shards. Each move is
    conditional on the item still being where it was found (an item that ended or moved meanwhile is
    left alone). Returns how many items moved."""
    moved = 0
    for shard in all_shards(read_shards)[shards:]:
        for item in _items_of(ddb, table_name, shard):
            pk = str(item["pk"])
            try:
                ddb.update_item(
                    TableName=table_name,
                    Key={"pk": {"S": pk}, "sk": {"S": str(item["sk"])}},
                    UpdateExpression="SET #s = :to",
                    ConditionExpression="#s = :from",
                    ExpressionAttributeNames={"#s": SHARD_ATTRIBUTE},
                    ExpressionAttributeValues={":to": {"S": shard_of(pk, shards)}, ":from": {"S": shard}},
                )
            except ddb.exceptions.ConditionalCheckFailedException:
                continue
            moved += 1
    return moved


def shard_counts(ddb: DynamoDBClient, table_name: str, *, read_shards: int) -> dict[str, int]:
    """How many items each shard of the ``due`` index holds."""
    return {shard: sum(1 for _ in _items_of(ddb, table_name, shard)) for shard in all_shards(read_shards)}
