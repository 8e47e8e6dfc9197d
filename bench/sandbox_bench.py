"""Sandbox throughput: N payment operations POST → COMPLETED through the local sandbox.

Prints ``sandbox_ops_per_second``, ``sandbox_p50_seconds`` and ``sandbox_p99_seconds``; never
asserts (goal from the spec: 1,000 within 60 s on 2 cores, p99 ≤ 10 s). N from ``BENCH_OPERATIONS``.

Baselines measured in the same run, against the same sandbox:
* ``emulator_putitem_per_second``: one client writing items to the emulator as fast as it can (before
  the run, the sandbox idle) -- the floor every pipeline step pays several times;
* ``sandbox_accept_per_second``: how fast the HTTP API answered the 202s (8 client threads), the
  front door alone, next to ``sandbox_ops_per_second`` for the whole pipeline.

And where the time goes (Linux, from /proc, over the run): ``emulator_cpu_ms_per_operation`` (the moto
server, one GIL-bound process: at most one core), ``workers_cpu_ms_per_operation`` (the Lambda execution
environments), ``glue_and_client_cpu_ms_per_operation`` (this process: the mappings, HTTP API and fakes,
and the bench client) and ``sandbox_cpu_ms_per_operation`` (all of them). From them, the least time
1,000 operations can take on this machine whatever the scheduling: ``emulator_bound_seconds_per_1000``
(1,000 x the emulator's CPU on its one core) and ``cpu_bound_seconds_per_1000`` (1,000 x all CPU over
the machine's cores) -- to set against the goal's 60 s.
"""

from __future__ import annotations

import os
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import requests
from bench_size import scaled  # bench/, the script's own directory

from emulator.cpu import cpu_seconds
from emulator.moto_patches import BASELINE_VARIABLE
from emulator.server import client, free_port
from local.sandbox import Sandbox, SandboxConfig

TERMINAL = {"COMPLETED", "FAILED"}


def _at(step: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(step["at"]).replace("Z", "+00:00")).timestamp()


def putitem_per_second(endpoint: str, table: str, seconds: float = 3.0) -> float:
    ddb = client("dynamodb", endpoint)
    writes, started = 0, time.time()
    while time.time() - started < seconds:
        ddb.put_item(TableName=table, Item={"pk": {"S": f"BENCH#{writes}"}, "sk": {"S": "BENCH"}})
        writes += 1
    return writes / (time.time() - started)


def run(count: int) -> dict[str, float]:
    """One sandbox, ``count`` payments; prints its figures and returns the ones the summary compares."""
    figures: dict[str, float] = {}
    config = SandboxConfig(emulator_port=free_port(), api_port=free_port(), write_state=False)
    with Sandbox(config, log=lambda *_: None) as sb:
        scratch = next(t for t in sb.topology.tables if t.endswith("-orders-inventory"))
        print(f"emulator_putitem_per_second: {putitem_per_second(sb.endpoint, scratch):.0f}", flush=True)
        session = requests.Session()
        session.auth = sb.client_auth()  # the routes are AWS_IAM: signed as the sandbox's client
        accepted: dict[str, float] = {}
        operations = next(t for t in sb.topology.tables if t.endswith("-operations"))
        ddb = client("dynamodb", sb.endpoint)

        def status(operation_id: str) -> str:
            # The operation's item, as functions/payments/store.py lays it out (operation_key).
            key = {"pk": {"S": f"OPERATION#{operation_id}"}, "sk": {"S": "OPERATION"}}
            item = ddb.get_item(
                TableName=operations,
                Key=key,
                ProjectionExpression="#s",
                ExpressionAttributeNames={"#s": "status"},
                ConsistentRead=True,
            ).get("Item", {})
            return str(item.get("status", {}).get("S", ""))

        def submit(i: int) -> None:
            body = {
                "paymentId": f"bench-{i}-{uuid.uuid4().hex[:6]}",
                "amount": "10.00",
                "currency": "EUR",
                "payer": "bench",
                "payee": "relay-shop",
                "details": {},
            }
            r = session.post(
                f"{sb.api_url}/payments", json=body, headers={"Idempotency-Key": uuid.uuid4().hex}
            )
            if r.status_code == 202:
                accepted[r.json()["operationId"]] = time.time()

        emulator_pid = sb.emulator.pid or -1
        cpu_before = cpu_seconds(os.getpid(), emulator_pid)
        started = time.time()
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(submit, range(count)))
        accept_seconds = time.time() - started
        deadline = started + 600
        # Wait for every operation to end, reading them in the order they were accepted and resuming
        # at the first one still running: one GetItem per operation plus one per poll (a table scan
        # each poll, as `local status` does, cost the emulator ~9 % of its CPU at 300 operations).
        pending = list(accepted)
        while pending and time.time() < deadline:
            while pending and status(pending[0]) in TERMINAL:
                pending.pop(0)
            if pending:
                time.sleep(1)
        cpu_after = cpu_seconds(os.getpid(), emulator_pid)
        latencies: list[float] = []
        # Seconds from the step before (the 202 for the first) to each step: where the latency goes.
        hops: dict[str, list[float]] = {}
        finished = started
        for op, at in accepted.items():
            view = session.get(f"{sb.api_url}/operations/{op}").json()
            if view.get("status") == "COMPLETED":
                times = [_at(step) for step in view["steps"]]
                done = times[-1]
                latencies.append(done - at)
                finished = max(finished, done)
                previous = at
                for step, when in zip(view["steps"], times, strict=True):
                    hops.setdefault(f"{step.get('step')}_{step.get('status')}", []).append(when - previous)
                    previous = when
        # Throughput up to the last completion (read from the operations, not from the polling).
        elapsed = max(finished - started, 1e-9)
        latencies.sort()
        completed = len(latencies)
        p99 = (
            latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))]
            if latencies
            else float("nan")
        )
        print(f"sandbox_operations: {count} (accepted {len(accepted)}, completed {completed})")
        print(f"sandbox_accept_per_second: {len(accepted) / accept_seconds:.2f}")
        print(f"sandbox_ops_per_second: {completed / elapsed:.2f}")
        figures["ops_per_second"] = completed / elapsed
        figures["p50_seconds"] = statistics.median(latencies) if latencies else float("nan")
        figures["p99_seconds"] = p99
        print(f"sandbox_seconds_to_last_completed: {elapsed:.1f}")
        print(f"sandbox_p50_seconds: {statistics.median(latencies) if latencies else float('nan'):.2f}")
        print(f"sandbox_p99_seconds: {p99:.2f}")
        if os.environ.get("BENCH_FUNCTIONS"):
            for name, fn in sorted(sb.runtime.functions.items()):
                if fn.invocations:
                    short = "/".join(name.split("-")[2:4])[:40]
                    mean_ms = 1000 * fn.busy_seconds / fn.invocations
                    print(
                        f"function {short}: {fn.invocations} invocations, {mean_ms:.0f} ms mean, "
                        f"{fn.cold_starts} cold"
                    )
        for name, seconds in hops.items():
            print(f"sandbox_p50_seconds_to_{name}: {statistics.median(seconds):.2f}")
        if cpu_after["all"] > 0:
            per_op = {k: (cpu_after[k] - cpu_before[k]) / max(completed, 1) for k in cpu_after}
            cores = os.cpu_count() or 1
            print(f"emulator_cpu_ms_per_operation: {per_op['emulator'] * 1000:.0f}")
            print(f"workers_cpu_ms_per_operation: {per_op['workers'] * 1000:.0f}")
            print(f"glue_and_client_cpu_ms_per_operation: {per_op['glue'] * 1000:.0f}")
            print(f"sandbox_cpu_ms_per_operation: {per_op['all'] * 1000:.0f}")
            parts = ("emulator", "workers", "glue", "all")
            figures |= {f"{part}_cpu_ms": per_op[part] * 1000 for part in parts}
            # Scaled to the goal's 1,000 operations, whatever N this run used.
            print(f"emulator_bound_seconds_per_1000: {per_op['emulator'] * 1000:.0f} (goal: all 1,000 in 60)")
            bound = per_op["all"] * 1000 / cores
            print(f"cpu_bound_seconds_per_1000: {bound:.0f} (on {cores} cores; goal 60)")
    return figures


def main() -> None:
    count = int(os.environ.get("BENCH_OPERATIONS", scaled(1000, 10)))
    # Before and after in one run: the sandbox without the speed-ups of issue 47
    # (RELAY_SANDBOX_BASELINE=1: emulator.moto_patches.BASELINE_SKIPS and the runtime's and mappings'
    # own), then with them, in turn, so a slow moment of the machine falls on both.
    rounds = int(os.environ.get("BENCH_ROUNDS", scaled(2, 1)))
    results: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for round_ in range(rounds):
        for label in ("before", "after"):
            if label == "before":
                os.environ[BASELINE_VARIABLE] = "1"
            else:
                os.environ.pop(BASELINE_VARIABLE, None)
            print(f"## {label} (round {round_ + 1} of {rounds})", flush=True)
            try:
                results[label].append(run(count))
            finally:
                os.environ.pop(BASELINE_VARIABLE, None)
    print("## before / after (medians of the rounds; after/before for the rate, before/after for the rest)")
    for figure in results["after"][0]:
        before = statistics.median(r.get(figure, float("nan")) for r in results["before"])
        after = statistics.median(r.get(figure, float("nan")) for r in results["after"])
        faster = after / before if figure == "ops_per_second" else before / after
        print(f"sandbox_{figure}: before {before:.2f}  after {after:.2f}  speed-up x{faster:.2f}")


if __name__ == "__main__":
    main()
