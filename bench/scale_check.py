"""Do a payment's requests grow with the volume? ``make cost-scale`` (``python -m bench.scale_check``).

`make capacity` multiplies the requests ``make cost`` counts per payment by a rate; that holds only if
they do not grow with the volume. This runs the payments flow at two sizes in one sandbox each
(default 200 and 2,000), and between the two also fires the sweeper while the larger batch is open
(every payment in the deadline index, none overdue): the sweeper queries each shard for what is
OVERDUE, so its requests must not grow with what is merely open. It prints, per request kind, the
count per payment at both sizes and their ratio, and the sweeper's requests per run with 0 and with N
payments open; it exits 1 when a per-payment count grows by more than ``--tolerance`` (10 %).
"""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.cost import _meter, _payment, counts, measure, payments_flow, periodic  # noqa: E402
from local.emulator import free_port  # noqa: E402
from local.lifecycle import sweep_now  # noqa: E402
from local.sandbox import Sandbox, SandboxConfig  # noqa: E402

# Idle polling happens on a clock, not per payment; its share of a run depends on how long it takes.
IDLE = "(empty"


def sweep_requests(sb: Sandbox) -> int:
    """The requests one sweep makes (the sweeper function's own, not the queue's glue)."""
    _meter(sb, reset=True)
    sweep_now(sb)
    return int(sum(r["requests"] for r in _meter(sb) if periodic(r["caller"]) and "glue" not in r["caller"]))


def run(size: int, log_dir: Path) -> dict[str, Any]:
    config = SandboxConfig(
        emulator_port=free_port(), api_port=free_port(), write_state=False, log_dir=log_dir
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
        if after > before * (1 + tolerance) + 0.01:
            grown.append(f"{kind}: {before:.3f} -> {after:.3f} per payment")
    return grown


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
        print(f"{kind:<58} {a:>10.3f} {b:>10.3f}  {ratio}{'  (idle, on a clock)' if IDLE in kind else ''}")
    for r in (small, large):
        print(
            f"sweeper requests per run: {r['idle_sweep']} with nothing open, {r['open_sweep']} with "
            f"{r['size']} payments open"
        )
    grown = compare(small, large, args.tolerance)
    sweep_grew = large["open_sweep"] > small["open_sweep"] * (1 + args.tolerance)
    for line in grown:
        print(f"GROWS: {line}")
    if sweep_grew:
        print(
            f"GROWS: the sweep's requests with payments open: {small['open_sweep']} -> {large['open_sweep']}"
        )
    print("requests per payment do not grow with volume" if not grown and not sweep_grew else "FAILED")
    return 1 if grown or sweep_grew else 0


if __name__ == "__main__":
    sys.exit(main())
