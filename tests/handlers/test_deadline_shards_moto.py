"""The deadline index's shard count changes on a live table (relay.deadlines): more shards need no
backfill, fewer shards are read at both counts, rebalanced, then read at the new count alone -- and no
overdue item is missed at any point."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from relay import deadlines

TABLE = "operations"
NOW = datetime(2026, 12, 4, 12, tzinfo=UTC)


@pytest.fixture
def ddb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": a, "AttributeType": t}
                for a, t in (
                    ("pk", "S"),
                    ("sk", "S"),
                    (deadlines.SHARD_ATTRIBUTE, "S"),
                    (deadlines.AT_ATTRIBUTE, "N"),
                )
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": deadlines.INDEX_NAME,
                    "KeySchema": [
                        {"AttributeName": deadlines.SHARD_ATTRIBUTE, "KeyType": "HASH"},
                        {"AttributeName": deadlines.AT_ATTRIBUTE, "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                }
            ],
        )
        yield client


def put(ddb: Any, ids: range, shards: int) -> None:
    for n in ids:
        attributes = deadlines.deadline_attributes(f"op-{n}", NOW - timedelta(minutes=1), shards)
        ddb.put_item(
            TableName=TABLE,
            Item={
                "pk": {"S": f"OPERATION#op-{n}"},
                "sk": {"S": "OPERATION"},
                deadlines.SHARD_ATTRIBUTE: {"S": attributes[deadlines.SHARD_ATTRIBUTE]},
                deadlines.AT_ATTRIBUTE: {"N": str(attributes[deadlines.AT_ATTRIBUTE])},
            },
        )


def found(ddb: Any, shards: int) -> set[str]:
    return {str(i["pk"]) for i in deadlines.overdue(ddb, TABLE, NOW, shards=shards)}


def everyone(ids: range) -> set[str]:
    return {f"OPERATION#op-{n}" for n in ids}


def test_more_shards_find_every_item_written_under_fewer_without_a_backfill(ddb: Any) -> None:
    put(ddb, range(0, 40), shards=4)  # the stage before
    put(ddb, range(40, 80), shards=64)  # after the deploy of the larger count

    assert found(ddb, shards=64) == everyone(range(80))
    assert {i for i in range(40, 80) if deadlines.shard_of(f"op-{i}", 64) not in deadlines.all_shards(4)}


def test_fewer_shards_are_read_at_both_counts_rebalanced_then_read_at_the_new_count(ddb: Any) -> None:
    put(ddb, range(0, 60), shards=64)
    # Deploy 8 with deadline_read_shards 64: writers hash into 8, readers read 64.
    put(ddb, range(60, 80), shards=8)
    assert found(ddb, shards=64) == everyone(range(80))
    above = sum(
        n
        for s, n in deadlines.shard_counts(ddb, TABLE, read_shards=64).items()
        if deadlines.shard_number(s) >= 8
    )
    assert above > 0
    assert found(ddb, shards=8) != everyone(range(80))  # what reading the new count too early would miss

    moved = deadlines.rebalance(ddb, TABLE, shards=8, read_shards=64)

    assert moved == above
    counts = deadlines.shard_counts(ddb, TABLE, read_shards=64)
    assert all(n == 0 for s, n in counts.items() if deadlines.shard_number(s) >= 8)
    assert found(ddb, shards=8) == everyone(range(80))  # deploy without deadline_read_shards
    assert deadlines.rebalance(ddb, TABLE, shards=8, read_shards=64) == 0


def test_the_default_count_keeps_ten_thousand_payments_a_second_under_half_a_partition() -> None:
    index_writes_per_payment, partition_wu_per_second = 2, 1000
    per_shard = 10_000 * index_writes_per_payment / deadlines.DEFAULT_SHARDS

    assert per_shard < partition_wu_per_second / 2
