"""CI's short chaos profile: ``local.chaos`` with 300 operations at the default fault rate.

Its own sandbox (the time scale is set at start, and the faults must not leak into the e2e suite's):
it runs on an xdist worker of its own, beside the e2e sandboxes (tests/scheduling.py), or before tests/e2e
starts the shared one in a single-process run. The run passes only if every invariant of
``make chaos`` holds, and only if each kind of fault was in fact injected, so a switch that stopped
working cannot pass for a system that survived it.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from emulator import aws_faults
from emulator.iam_report import denials
from emulator.server import free_port
from local.chaos import CHAOS_WORKERS, CI_OPERATIONS, CLOCK, DEFAULT_FAULT_RATE, TIME_SCALE, Chaos
from local.sandbox import Sandbox, SandboxConfig

pytestmark = pytest.mark.e2e


def test_the_short_chaos_profile_keeps_every_invariant(tmp_path: Path) -> None:
    config = SandboxConfig(
        emulator_port=free_port(),
        api_port=0,
        write_state=False,
        log_dir=tmp_path / "logs",
        time_scale=TIME_SCALE,
        max_workers_per_function=CHAOS_WORKERS,
        clock_overrides=dict(CLOCK),
        trace_everything=False,
    )
    if os.environ.get("RELAY_CDK_OUT"):
        config.cdk_out = Path(os.environ["RELAY_CDK_OUT"]).resolve()
    out = io.StringIO()
    with Sandbox(config, log=lambda *_: None) as sb:
        chaos = Chaos(sb, operations=CI_OPERATIONS, fault_rate=DEFAULT_FAULT_RATE, seed=19, out=out)
        ok = chaos.run()
        table = out.getvalue()
        assert sb.runtime is not None and sb.mappings is not None
        kills = sum(sb.runtime.crashes.kills.values())
        faults = {(f["phase"], f["kind"]) for f in aws_faults.injected(sb.endpoint)}
        partner = chaos.partner_faults()
        duplicated = sum(m.stats.duplicated_records for m in sb.mappings.items)
        denied = denials(sb.endpoint)
    assert ok, table
    assert kills > 0, table
    assert {kind for _, kind in faults} == set(aws_faults.KINDS), faults
    assert {"outage", "5xx", "fail_after_commit", "timeout", "hang_after_commit"} <= set(partner), partner
    assert duplicated > 0, table
    assert len(chaos.poisons) >= CI_OPERATIONS // 50, table
    assert chaos.tally.outages, table
    assert chaos.tally.replays and chaos.tally.concurrent and chaos.tally.cancels, table
    assert chaos.tally.late_duplicates, table
    assert not denied, denied
