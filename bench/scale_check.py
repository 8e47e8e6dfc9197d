"""Do a payment's requests grow with the volume? ``make cost-scale`` (``python -m bench.scale_check``).

`make capacity` multiplies the requests ``make cost`` counts per payment by a rate; that holds only if
they do not grow with the volume. This runs the payments flow at two sizes in one sandbox each
(default 200 and 2,000), and between the two also fires the sweeper while the larger batch is open
(every payment in the deadline index, none overdue): the sweeper queries each shard for what is
OVERDUE, so its queries must not grow with what is merely open. It prints, per request kind, the
count per payment at both sizes and their ratio, and the sweeper's requests per run with 0 and with N
payments open; it exits 1 when a per-payment count grows by more than ``--tolerance`` (10 %), or when
a poller's batched request (``BATCHED``) comes more often than once per message it could carry.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.cost import _meter, _payment, measure, payments_flow, periodic  # noqa: E402
from bench.pricing import counts  # noqa: E402
from emulator.server import free_port  # noqa: E402
from local.lifecycle import SWEEP_SCHEDULE  # noqa: E402
from local.sandbox import Sandbox, SandboxConfig  # noqa: E402

# Idle polling happens on a clock, not per payment; its share of a run depends on how long it takes.
IDLE = "(empty"

# A poller's requests carry as many messages as have arrived since its last poll: how full each batch
# comes depends on the arrival rate and the batching window, not on how many payments a run holds (a
# mapping polls several times within one window and invokes once, so the invocations stay exact).
# Their bound is one request per message: each non-empty poll carries at least one.
# The sweeper's reads of the deadline index: one Query per shard and page of overdue items, whatever is
# open. Its other requests are the work on what it found overdue (a payment past its deadline by the
# time the larger batch has been submitted is rightly swept), so they are printed, not compared.
QUERY = "dynamodb:Query"

BATCHED = {
    "sqs:ReceiveMessage": ("sns:Deliver to SQS", "sqs:SendMessage", "sqs:SendMessageBatch"),
    "sqs:DeleteMessageBatch": ("sns:Deliver to SQS", "sqs:SendMessage", "sqs:SendMessageBatch"),
    "dynamodbstreams:GetRecords": ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"),
}


def _sweeps(sb: Sandbox) -> int:
    assert sb.runtime is not None
    return sum(fn.invocations for name, fn in sb.runtime.functions.items() if periodic(name))


def _sweeper_requests(sb: Sandbox) -> dict[str, float]:
    """The sweeper function's own requests by kind (not its queue's glue) since the meter's reset."""
    kinds: dict[str, float] = {}
    for r in _meter(sb):
        if periodic(r["caller"]) and "glue" not in r["caller"]:
            kind = f"{r['service']}:{r['action']}"
            kinds[kind] = kinds.get(kind, 0) + float(r["requests"])
    return kinds


def sweep_requests(sb: Sandbox, timeout: float = 60.0) -> dict[str, float]:
    """The requests of one sweep, by kind: fire its schedule, wait for its invocation, then until its
    requests stop coming (other work may still be in flight, so the queues are not a signal). The
    schedule also fires on its own every few minutes: the counts are divided by the runs seen."""
    before = _sweeps(sb)
    _meter(sb, reset=True)
    (firing,) = sb.fire_schedule(sb.schedule_named(SWEEP_SCHEDULE))
    deadline = time.monotonic() + timeout
    while _sweeps(sb) == before:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the sweeper did not run within {timeout:g} s ({firing.error or 'sent'})")
        time.sleep(0.2)
    seen, still = _sweeper_requests(sb), 0
    while still < 3 and time.monotonic() < deadline:
        time.sleep(1.0)
        now = _sweeper_requests(sb)
        still = still + 1 if now == seen else 0
        seen = now
    runs = _sweeps(sb) - before
    return {kind: n / runs for kind, n in seen.items()}


def run(size: int, log_dir: Path) -> dict[str, Any]:
    # Submitting the larger batch takes longer than the fast clock's 5 s of silence: at that, the open
    # payments would be overdue by the time the sweeper runs, and rightly swept. Production's
    # silence (15 minutes) keeps them merely open, which is the case to measure.
    config = SandboxConfig(
        emulator_port=free_port(),
        api_port=free_port(),
        write_state=False,
        log_dir=log_dir,
        clock_overrides={"SILENCE_SECONDS": "900"},
    )
    with Sandbox(config, log=lambda *_: None) as sb:
        idle_sweep = sweep_requests(sb)
        per_payment = counts(measure(sb, "payments", size, payments_flow(sb, size)))
        # Now N payments open at once, each in the deadline index and none overdue: the legacy
        # partner answers "accepted, still processing", and the status checks wait out their backoff.
        sb.legacy.set_knobs(accept_then_complete_after=1_000)
        for _ in range(size):
            sb.call("POST", "/payments", json=_payment(), headers={"Idempotency-Key": uuid.uuid4().hex})
        open_sweep = sweep_requests(sb)
    return {"size": size, "per_payment": per_payment, "idle_sweep": idle_sweep, "open_sweep": open_sweep}


def compare(small: dict[str, Any], large: dict[str, Any], tolerance: float) -> list[str]:
    """The request kinds whose count per payment grew by more than ``tolerance`` from small to large."""
    grown = []
    for kind in sorted(set(small["per_payment"]) | set(large["per_payment"])):
        if IDLE in kind:
            continue
        before, after = small["per_payment"].get(kind, 0.0), large["per_payment"].get(kind, 0.0)
        if kind in BATCHED:
            bound = batch_bound(large, kind)
            if after > bound + 0.01:
                grown.append(f"{kind}: {after:.3f} per payment, above one per message ({bound:.3f})")
        elif after > before * (1 + tolerance) + 0.01:
            grown.append(f"{kind}: {before:.3f} -> {after:.3f} per payment")
    return grown


def _kinds(requests: dict[str, float]) -> str:
    return ", ".join(f"{kind} {n:g}" for kind, n in sorted(requests.items()))


def batch_bound(run: dict[str, Any], kind: str) -> float:
    """A batched request's ceiling per payment: the messages (or stream records) it could carry."""
    return float(sum(run["per_payment"].get(source, 0.0) for source in BATCHED[kind]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="make cost-scale")
    parser.add_argument("--sizes", default="200,2000", help="two comma-separated payment counts")
    parser.add_argument("--tolerance", type=float, default=0.10)
    args = parser.parse_args(argv)
    small_size, large_size = (int(n) for n in args.sizes.split(","))
    log_dir = ROOT / ".sandbox" / "cost-logs"
    small, large = run(small_size, log_dir), run(large_size, log_dir)
    print(f"{'request':<58} {small_size:>10} {large_size:>10}  ratio")
    for kind in sorted(set(small["per_payment"]) | set(large["per_payment"])):
        a, b = small["per_payment"].get(kind, 0.0), large["per_payment"].get(kind, 0.0)
        ratio = f"{b / a:.2f}" if a else "-"
        note = "  (idle, on a clock)" if IDLE in kind else ""
        if kind in BATCHED:
            note = f"  (batched: at most {batch_bound(large, kind):.0f}, one per message)"
        print(f"{kind:<58} {a:>10.3f} {b:>10.3f}  {ratio}{note}")
    for r in (small, large):
        print(
            f"sweeper queries per run: {r['idle_sweep'].get(QUERY, 0):g} with nothing open, "
            f"{r['open_sweep'].get(QUERY, 0):g} with {r['size']} payments open; all its requests: "
            f"{sum(r['idle_sweep'].values()):g} and {sum(r['open_sweep'].values()):g} "
            f"({_kinds(r['open_sweep'])})"
        )
    grown = compare(small, large, args.tolerance)
    sweep_grew = large["open_sweep"].get(QUERY, 0) > small["open_sweep"].get(QUERY, 0) * (1 + args.tolerance)
    for line in grown:
        print(f"GROWS: {line}")
    if sweep_grew:
        print(
            f"GROWS: the sweep's queries with payments open: {small['open_sweep'].get(QUERY, 0):g} -> "
            f"{large['open_sweep'].get(QUERY, 0):g}"
        )
    print("requests per payment do not grow with volume" if not grown and not sweep_grew else "FAILED")
    return 1 if grown or sweep_grew else 0


if __name__ == "__main__":
    sys.exit(main())
