"""Whole-app synth time, beside an empty CDK app synthesized in the same run (the jsii/Node start-up floor).

Prints `<name>: <value>` lines; asserts nothing. Goal (issue 2): synth_seconds ≤ 15 on 2 cores.
Run: `.venv/bin/python bench/synth_bench.py` (or `make bench`).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_size import scaled  # bench/, the script's own directory

ROOT = Path(__file__).resolve().parents[1]
RUNS = int(os.environ.get("BENCH_RUNS", scaled(3, 1)))
EMPTY_APP = "import aws_cdk as cdk\napp = cdk.App()\ncdk.Stack(app, 'empty')\napp.synth()\n"


def _timed(args: list[str]) -> float:
    with tempfile.TemporaryDirectory() as outdir:
        env = {**os.environ, "CDK_OUTDIR": outdir, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
        start = time.perf_counter()
        subprocess.run(args, cwd=ROOT, env=env, check=True, capture_output=True)
        return time.perf_counter() - start


def main() -> None:
    app = [_timed([sys.executable, "app.py"]) for _ in range(RUNS)]
    empty = [_timed([sys.executable, "-c", EMPTY_APP]) for _ in range(RUNS)]
    print(f"synth_seconds: {statistics.median(app):.2f}")
    print(f"synth_empty_app_seconds: {statistics.median(empty):.2f}")
    print(f"synth_over_empty_app_ratio: {statistics.median(app) / statistics.median(empty):.2f}")
    print(f"synth_runs: {RUNS}")


if __name__ == "__main__":
    main()
