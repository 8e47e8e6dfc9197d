"""Sandbox throughput: N payment operations POST → COMPLETED through the local sandbox.

Prints ``sandbox_ops_per_second``, ``sandbox_p50_seconds`` and ``sandbox_p99_seconds``; never
asserts (goal from the spec: 1,000 within 60 s on 2 cores, p99 ≤ 10 s). N from ``BENCH_OPERATIONS``.

Baselines measured in the same run, against the same sandbox:
* ``emulator_putitem_per_second``: one client writing items to the emulator as fast as it can (before
  the run, the sandbox idle) -- the floor every pipeline step pays several times;
* ``sandbox_accept_per_second``: how fast the HTTP API answered the 202s (8 client threads), the
  front door alone, next to ``sandbox_ops_per_second`` for the whole pipeline.
"""

from __future__ import annotations

import os
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import requests

from local.emulator import client, free_port
from local.sandbox import Sandbox, SandboxConfig, snapshot


def putitem_per_second(endpoint: str, table: str, seconds: float = 3.0) -> float:
    ddb = client("dynamodb", endpoint)
    writes, started = 0, time.time()
    while time.time() - started < seconds:
        ddb.put_item(TableName=table, Item={"pk": {"S": f"BENCH#{writes}"}, "sk": {"S": "BENCH"}})
        writes += 1
    return writes / (time.time() - started)


def main() -> None:
    count = int(os.environ.get("BENCH_OPERATIONS", "1000"))
    config = SandboxConfig(emulator_port=free_port(), api_port=free_port(), write_state=False)
    with Sandbox(config, log=lambda *_: None) as sb:
        scratch = next(t for t in sb.topology.tables if t.endswith("-orders-inventory"))
        print(f"emulator_putitem_per_second: {putitem_per_second(sb.endpoint, scratch):.0f}", flush=True)
        session = requests.Session()
        accepted: dict[str, float] = {}

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

        started = time.time()
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(submit, range(count)))
        accept_seconds = time.time() - started
        deadline = started + 600
        while time.time() < deadline:
            # A snapshot scans the operations table: every 5 s, not every second, so that the
            # measurement does not compete with the pipeline for the emulator.
            ops = snapshot(sb.state())["operations"]
            if ops.get("COMPLETED", 0) + ops.get("FAILED", 0) >= len(accepted):
                break
            time.sleep(5)
        latencies: list[float] = []
        finished = started
        for op, at in accepted.items():
            view = session.get(f"{sb.api_url}/operations/{op}").json()
            if view.get("status") == "COMPLETED":
                done = datetime.fromisoformat(view["steps"][-1]["at"].replace("Z", "+00:00")).timestamp()
                latencies.append(done - at)
                finished = max(finished, done)
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
        print(f"sandbox_seconds_to_last_completed: {elapsed:.1f}")
        print(f"sandbox_p50_seconds: {statistics.median(latencies) if latencies else float('nan'):.2f}")
        print(f"sandbox_p99_seconds: {p99:.2f}")


if __name__ == "__main__":
    main()
