"""What the sandbox's operations look like after a run: by state, and what is left behind.

"Stranded" is what the payments sweeper would act on: a non-terminal operation whose deadline has
passed -- read from the tables' deadline index
(``relay.deadlines``: one Query per shard, no scan). After a demo or an e2e run, with the sweeper
fired once at the end, both counts must be 0.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from emulator.server import client

if TYPE_CHECKING:
    from emulator.eventbridge import Firing
    from local.sandbox import Sandbox

SWEEP_SCHEDULE = "payments-sweep"
SWEEPS_QUEUE = "payments-sweeps"
STALL_SECONDS = 60.0  # a wait gives up after this long with nothing moving
WAIT_CAP_SECONDS = 300.0  # and in any case after this long


class Patience:
    """A wait that lasts as long as the work moves: it gives up after ``stall`` seconds in which
    what it watches did not change, or after ``cap`` seconds in all. On a machine busy with other
    work (the test suite's other workers) the same work takes 3x longer, and still finishes.

    ``waiting.more(progress)`` is True while the loop should go on; ``progress`` is any value that
    changes when work is done (a count, a tuple of states)."""

    def __init__(self, stall: float = STALL_SECONDS, cap: float = WAIT_CAP_SECONDS) -> None:
        self.stall = stall
        self.started = self.moved = time.monotonic()
        self.cap = cap
        self.last: object = None

    def more(self, progress: object) -> bool:
        now = time.monotonic()
        if progress != self.last:
            self.last, self.moved = progress, now
        return now - self.moved < self.stall and now - self.started < self.cap


def operations_table(tables: Any) -> str:
    return str(next(t for t in tables if t.endswith("payments-operations")))


def stranded(endpoint: str, table: str, now: datetime | None = None) -> Counter[str]:
    """Items past their deadline, by kind (``operation``; anything else by its sort key)."""
    from relay import deadlines

    found: Counter[str] = Counter()
    for item in deadlines.overdue(client("dynamodb", endpoint), table, now or datetime.now(UTC)):
        # The ``due`` index projects keys only: the sort key says what the item is.
        found["operation" if item.get("sk") == "OPERATION" else str(item.get("sk"))] += 1
    return found


def left_behind(endpoint: str, tables: Any, now: datetime | None = None) -> Counter[str]:
    """What any flow left behind after a run, by what it is: the payments' overdue work
    (``stranded``), an ended operation still in the deadline index (its last events were never
    published: the stream publisher takes it out once they are)."""
    found: Counter[str] = Counter()
    operations = operations_table(tables)
    for kind, n in stranded(endpoint, operations, now).items():
        found[f"payments {kind} overdue"] += n
    ddb = client("dynamodb", endpoint)
    from relay import deadlines

    for page in ddb.get_paginator("scan").paginate(
        TableName=operations,
        IndexName=deadlines.INDEX_NAME,
    ):
        for key in page.get("Items", []):
            keys = {"pk": key["pk"], "sk": key["sk"]}
            item = ddb.get_item(TableName=operations, Key=keys, ConsistentRead=True).get("Item") or {}
            if "expiresAt" in item:
                found["payments ended, events unpublished"] += 1
    return +found


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


def sweep_now(sb: Sandbox, *, timeout: float = 30.0) -> Firing:
    """Fire the payments sweeper's schedule (it runs every few minutes on real time) and wait until
    the sweep has been processed: its queue empty and its mapping's hands too. What the sweep re-drives
    is the caller's to wait for (the rest of the stage need not be idle: retries may be in flight)."""
    (firing,) = sb.fire_schedule(sb.schedule_named(SWEEP_SCHEDULE))
    if not firing.sent:
        raise RuntimeError(f"the sweep schedule could not send: {firing.error}")
    name, url = next((name, url) for name, url in sb.topology.queues.items() if name.endswith(SWEEPS_QUEUE))
    if sb.mappings is None:
        raise RuntimeError("the stage is not started")
    sweeper = next(m for m in sb.mappings.items if m.spec.source_arn.endswith(f":{name}"))
    sqs = client("sqs", sb.endpoint)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        waiting = int(attrs["ApproximateNumberOfMessages"]) + int(
            attrs["ApproximateNumberOfMessagesNotVisible"]
        )
        if waiting == 0 and sweeper.pending() == 0:
            return firing
        time.sleep(0.3)
    raise TimeoutError(f"the sweep was not processed within {timeout:g} s")
