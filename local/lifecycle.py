"""What the sandbox's operations look like after a run: by state, and what is left behind.

"Stranded" is what the payments sweeper would act on: a non-terminal operation, or an outbox row
never published, whose deadline has passed -- read from the tables' deadline index
(``relay.deadlines``: one Query per shard, no scan). After a demo or an e2e run, with the sweeper
fired once at the end, both counts must be 0.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

from local.emulator import client


def operations_table(tables: Any) -> str:
    return str(next(t for t in tables if t.endswith("payments-operations")))


def stranded(endpoint: str, table: str, now: datetime | None = None) -> Counter[str]:
    """Items past their deadline, by kind (``operation``, ``outbox``)."""
    from relay import deadlines

    found: Counter[str] = Counter()
    for item in deadlines.overdue(client("dynamodb", endpoint), table, now or datetime.now(UTC)):
        found[str(item.get("kind"))] += 1
    return found


def retries(endpoint: str, table: str) -> int:
    """How often the operations' steps waited for a partner (the ``retries`` counter), in total."""
    ddb = client("dynamodb", endpoint)
    total = 0
    for page in ddb.get_paginator("scan").paginate(
        TableName=table,
        FilterExpression="attribute_exists(retries)",
        ProjectionExpression="retries",
    ):
        total += sum(int(item["retries"]["N"]) for item in page.get("Items", []))
    return total
