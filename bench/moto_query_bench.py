"""Query of a table in the emulator: ``emulator.moto_patches`` patch 12 (the partition alone) beside
moto's own Query (every item of the table listed and sorted). Prints ``<name>: <value>`` lines.
Figures only -- nothing here is asserted.

Run from the repo root: ``.venv/bin/python bench/moto_query_bench.py``.

In-process moto (``mock_aws``), the operations table's shape: partitions of two items (the
operation and its request key), at 1,000, 4,000 and 16,000 items. Each figure is the CPU time per
Query of one partition, and per Query of one shard of a deadline index (the sweeper's), through the
DynamoDB backend (the Query alone), both variants in the same process and the same table, so each
ratio is a same-run comparison.
"""

from __future__ import annotations

import time

from bench_size import SMALL, scaled  # bench/, the script's own directory
from in_process_moto import prepare

prepare()

SIZES = (1_000, 4_000, 16_000) if not SMALL else (1_000, 2_000)
QUERIES = scaled(200, 10)
INDEX_QUERIES = scaled(20, 2)
SHARDS = 10


def _per_query_us(backend: object, table: str, partitions: int) -> float:
    from moto.dynamodb.models.dynamo_type import DynamoType

    started = time.process_time()
    for i in range(QUERIES):
        items, _, _ = backend.get_table(table).query(  # type: ignore[attr-defined]
            DynamoType({"S": f"OPERATION#{i * 7919 % partitions}"}), None, [], None, None, True, None
        )
        assert len(items) == 2  # the figures are for a correct answer
    return (time.process_time() - started) / QUERIES * 1e6


def _per_index_query_us(backend: object, table: str, partitions: int) -> float:
    """One shard of the deadline index, the sweeper's Query (``at <= now``)."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    now = [DynamoType({"N": "100"})]
    started = time.process_time()
    for i in range(INDEX_QUERIES):
        items, _, _ = backend.get_table(table).query(  # type: ignore[attr-defined]
            None,
            "LE",
            now,
            None,
            None,
            True,
            None,
            index_name="deadlines",
            hash_key_conditions=[("shard", DynamoType({"S": str(i % SHARDS)}))],
            range_key_conditions=[("at", "LE", now)],
        )
        assert len(items) == partitions // SHARDS // 10  # the figures are for a correct answer
    return (time.process_time() - started) / INDEX_QUERIES * 1e6


def main() -> None:
    import boto3
    from moto import mock_aws
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    from emulator.patches.partition_query import install as partition_query

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        backend = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
        for size in SIZES:
            table = f"ops-{size}"
            client.create_table(
                TableName=table,
                KeySchema=[
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                AttributeDefinitions=[
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                    {"AttributeName": "shard", "AttributeType": "S"},
                    {"AttributeName": "at", "AttributeType": "N"},
                ],
                GlobalSecondaryIndexes=[
                    {
                        "IndexName": "deadlines",
                        "KeySchema": [
                            {"AttributeName": "shard", "KeyType": "HASH"},
                            {"AttributeName": "at", "KeyType": "RANGE"},
                        ],
                        "Projection": {"ProjectionType": "KEYS_ONLY"},
                    }
                ],
                BillingMode="PAY_PER_REQUEST",
            )
            partitions = size // 2
            for i in range(partitions):
                # Every operation waits on a deadline; one in ten is overdue.
                deadline = {"shard": {"S": str(i % SHARDS)}, "at": {"N": "50" if i % 100 < 10 else "500"}}
                operation = {"pk": {"S": f"OPERATION#{i}"}, "sk": {"S": "OPERATION"}, "s": {"S": "x" * 300}}
                backend.put_item(table, {**operation, **deadline})
                backend.put_item(table, {**operation, "sk": {"S": "REQUEST#key"}})
            own = _per_query_us(backend, table, partitions), _per_index_query_us(backend, table, partitions)
            remove = partition_query()
            try:
                patched = (
                    _per_query_us(backend, table, partitions),
                    _per_index_query_us(backend, table, partitions),
                )
            finally:
                remove()
            for kind, before, after in zip(("query", "index_query"), own, patched, strict=True):
                print(f"moto_own_us_per_{kind}_{size}_items: {before:.0f}")
                print(f"patched_us_per_{kind}_{size}_items: {after:.0f}")
                print(f"moto_own_over_patched_{kind}_{size}_items: {before / after:.1f}")


if __name__ == "__main__":
    main()
