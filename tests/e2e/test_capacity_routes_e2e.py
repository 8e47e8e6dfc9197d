"""The capacity model (bench/capacity.py) knows every DynamoDB write the flows make: each flow of
`make cost` run small on the session's sandbox, then every (function, action, table) the meter and the
emulator's IAM report measured must be placed on a table whose key the model has (``KEYS``). A new
table, or a request the calls per table do not explain, fails here instead of being modelled as
nothing."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bench import cost
from bench.capacity import routes, unknown
from local.sandbox import Sandbox


def snapshot_flow_with_a_fresh_hour(sb: Sandbox, n: int) -> cost.Drive:
    """``cost.snapshot_flow`` fires the current hour and the ones before it. In this shared sandbox the
    hourly schedule (on the real clock, at each hour's start) or tests/e2e/test_agents_e2e.py may have
    taken them already, and a job for an hour done is a duplicate that writes nothing (seen in a
    clean-clone run at 21:00:11). So one more job, for an hour nothing else fires, is always measured
    writing."""
    flow = cost.snapshot_flow(sb, n)

    def drive() -> tuple[int, int]:
        sent = flow()
        hour = datetime(2010, 1, 1, tzinfo=UTC) + timedelta(hours=random.randrange(24 * 365 * 9))
        for firing in sb.fire_schedule(sb.schedule_named("scores-hourly-snapshot"), hour):
            firing.wait()
        return sent

    return drive


FLOWS = {
    "payments": cost.payments_flow,
    "orders": cost.orders_flow,
    "reports": cost.reports_flow,
    "snapshot": snapshot_flow_with_a_fresh_hour,
}


def per_operation(m: Any) -> dict[str, Any]:
    """A measured flow in the shape of make cost's JSON (what bench/capacity.py reads)."""
    n = m.operations
    return {
        "by_caller_per_operation": [
            {**r, "requests": r["requests"] / n, "billed": r["billed"] / n, "empty": r["empty"] / n}
            for r in m.requests
        ],
        "table_calls_per_operation": [{**c, "calls": c["calls"] / n} for c in m.table_calls],
    }


@pytest.mark.parametrize("flow", sorted(FLOWS))
def test_every_dynamodb_write_of_a_flow_is_on_a_table_the_capacity_model_knows(
    sandbox: Sandbox, flow: str
) -> None:
    m = cost.measure(sandbox, flow, 2, FLOWS[flow](sandbox, 2))
    figures = per_operation(m)
    indexes = cost._indexes(sandbox)
    assert unknown(figures, indexes) == []
    found, _ = routes(figures, indexes)
    writes = {(r.function, r.action, r.table) for r in found if r.action not in ("GetItem", "Query", "Scan")}
    assert writes, f"the {flow} flow measured no DynamoDB write"
