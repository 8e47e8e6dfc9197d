"""The README's make targets that run the sandbox, each run through make in a short form: a target whose
recipe, variables or command line broke fails here. Free ports, and everything the runs write in a
temporary folder (``--state-dir``, ``COST_JSON``): a developer's ``make local`` and ``.sandbox`` are left
alone."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from local.demo_readme import ROOT
from tests.demo.make_runs import MAKE, MAKEFILE, local_args, make, tail

pytestmark = pytest.mark.e2e

# Enough for one of each fault kind at the default fault rate (local.chaos scales its poison to the run).
CHAOS_SHORT = "60"


def test_make_chaos_injects_every_fault_kind_it_claims_and_keeps_every_invariant(tmp_path: Path) -> None:
    run = make("chaos", f"CHAOS_OPERATIONS={CHAOS_SHORT}", f"LOCAL_ARGS={local_args(tmp_path)} --no-state")
    assert run.returncode == 0, tail(run)
    assert "PASS  every fault kind the run claims was injected at least once" in run.stdout, tail(run)
    assert f"PASS: chaos with {CHAOS_SHORT} operations" in run.stdout, tail(run)
    assert not (tmp_path / "state.json").exists()


def test_make_cost_writes_its_figures_and_make_capacity_reads_them(tmp_path: Path) -> None:
    figures = tmp_path / "cost.json"
    run = make("cost", "COST_OPERATIONS=5", f"COST_JSON={figures}")
    assert run.returncode == 0, tail(run)
    results = json.loads(figures.read_text())
    assert set(results["flows"]) == {"payments", "orders", "reports", "snapshot"}, results["flows"].keys()
    assert all(flow["usd_per_million"] > 0 for flow in results["flows"].values()), results["flows"]
    assert re.search(r"^cost_per_million_payments_usd: \d", run.stdout, re.MULTILINE), tail(run)
    assert (tmp_path / "cost-logs").is_dir()  # its sandbox's logs beside the figures, not in .sandbox

    capacity = make("capacity", "RATE=100", f"COST_JSON={figures}")
    assert capacity.returncode == 0, tail(capacity)
    assert "100" in capacity.stdout and "binds" in capacity.stdout, tail(capacity)


def test_make_capacity_refuses_without_make_costs_figures(tmp_path: Path) -> None:
    run = make("capacity", "RATE=100", f"COST_JSON={tmp_path / 'none.json'}")
    assert run.returncode == 2 and "run 'make cost' first" in run.stderr, tail(run)


def test_make_cost_scale_compares_two_sizes(tmp_path: Path) -> None:
    run = make("cost-scale", "SIZES=10,20")
    assert re.search(r"^request +10 +20 +ratio$", run.stdout, re.MULTILINE), tail(run)
    assert run.stdout.count("sweeper queries per run:") == 2, tail(run)
    if run.returncode == 0:
        assert "requests per payment do not grow with volume" in run.stdout, tail(run)
    else:
        # At 10 and 20 payments one batch more is 0.1 a payment (10 %), so a batched request may read
        # as growing: the verdict is the target's at its default sizes (200, 2,000). Here the run must
        # have gone through to that verdict, and failed on nothing else.
        assert re.search(r"^GROWS: ", run.stdout, re.MULTILINE), tail(run)
        assert "Traceback" not in run.stderr, tail(run)


def _wait_for_state(state_file: Path, process: subprocess.Popen[str], timeout: float) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"make local exited {process.returncode} before it served"
        if state_file.exists():
            try:
                state: dict[str, object] = json.loads(state_file.read_text())
            except ValueError:  # being written
                state = {}
            if state.get("apiUrls"):
                return state
        time.sleep(0.5)
    raise AssertionError(f"make local wrote no {state_file} within {timeout:.0f} s")


def test_make_local_serves_make_smoke_until_ctrl_c(tmp_path: Path) -> None:
    """``make local`` serves the whole app until Ctrl-C; ``make smoke STAGE=local`` passes against it, the
    sandbox named by ``SMOKE_ARGS`` (its state file in the temporary folder), never a developer's."""
    log = (tmp_path / "local.log").open("w+", encoding="utf-8")
    process = subprocess.Popen(
        [MAKE, "-f", str(MAKEFILE), "--no-print-directory", "local", f"LOCAL_ARGS={local_args(tmp_path)}"],
        cwd=ROOT,
        env=dict(os.environ),
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    state_file = tmp_path / "state.json"
    try:
        state = _wait_for_state(state_file, process, timeout=300)
        smoke = make("smoke", "STAGE=local", f"SMOKE_ARGS=--sandbox-state {state_file}")
        assert smoke.returncode == 0, tail(smoke)
        assert f"the running sandbox (state.json: pid {state['pid']})" in smoke.stdout, tail(smoke)
        assert re.search(r"smoke: \d+ checks, \d+ PASS, 0 FAIL", smoke.stdout), tail(smoke)
        os.kill(int(str(state["pid"])), signal.SIGINT)  # Ctrl-C, to `python -m local up` under make
        code = process.wait(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=60)
    log.seek(0)
    output = log.read()
    assert code == 0, output[-4000:]
    assert "Ctrl-C stops everything." in output and "stopping…" in output, output[-4000:]
    assert not state_file.exists(), "make local left its state file behind after Ctrl-C"
