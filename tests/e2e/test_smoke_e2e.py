"""``python -m ops smoke`` (``make smoke STAGE=local``) against the session's sandbox, as CI runs it: the
suite finds the sandbox by its state (as it finds ``make local``'s), the stage by DescribeStacks, and every
check passes; a stage with no stacks is a one-paragraph error with exit 2, and a failing check exit 1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from emulator.server import client
from local.sandbox import Sandbox
from ops.__main__ import main
from ops.smoke import CHECKS

pytestmark = pytest.mark.e2e

LINES = {
    "stacks",
    "scores API without its key → 401",
    "every queue has its DLQ and an alarm",
    "hourly schedule enabled",
    "python -m ops doctor clean",
    "invalid body → 400, nothing stored",
    "payment → COMPLETED, retry → same operation",
    "order placed → paid → shipped once",
    "no IAM denials (sandbox)",
}


@pytest.fixture
def state_file(sandbox: Sandbox, tmp_path: Path) -> Path:
    """The session sandbox's state, as ``make local`` writes ``.sandbox/state.json``."""
    path = tmp_path / "state.json"
    path.write_text(json.dumps(sandbox.state()))
    return path


def checks(out: str) -> dict[str, str]:
    """Check name -> PASS/FAIL, from the suite's one line per check."""
    found = {}
    for line in out.splitlines():
        if line.startswith(("PASS  ", "FAIL  ")):
            verdict, rest = line.split("  ", 1)
            found[rest.split(": ", 1)[0]] = verdict
    return found


def test_the_smoke_suite_passes_against_the_sandbox(
    state_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["smoke", "--stage", "local", "--sandbox-state", str(state_file)])

    out = capsys.readouterr().out
    assert code == 0, out
    assert checks(out) == dict.fromkeys(LINES, "PASS"), out
    assert "smoke: relay-dev in us-east-1, the running sandbox" in out
    assert "the sandbox's shipping API created exactly 1 shipment for it" in out


def test_a_stage_without_stacks_is_one_paragraph_and_exit_2(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["smoke", "--stage", "nosuch", "--endpoint-url", sandbox.endpoint, "--api-url", sandbox.api_url]
    )

    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.startswith(
        f"error: no Relay stage 'nosuch' in us-east-1 at the endpoint {sandbox.endpoint}"
    )
    assert "relay-nosuch-core" in captured.err
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert not checks(captured.out)


@pytest.fixture
def schedule_disabled(sandbox: Sandbox) -> Iterator[str]:
    scheduler = client("scheduler", sandbox.endpoint)
    name = sandbox.schedule_named("scores-hourly-snapshot")
    schedule = scheduler.get_schedule(Name=name)
    keep = (
        "Name",
        "GroupName",
        "ScheduleExpression",
        "ScheduleExpressionTimezone",
        "FlexibleTimeWindow",
        "Target",
    )
    request = {k: schedule[k] for k in keep if k in schedule}
    scheduler.update_schedule(**request, State="DISABLED")
    try:
        yield name
    finally:
        scheduler.update_schedule(**request, State="ENABLED")


def test_a_failing_check_is_a_fail_line_and_exit_1(
    state_file: Path, schedule_disabled: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "schedule" in CHECKS
    code = main(["smoke", "--stage", "local", "--sandbox-state", str(state_file), "--only", "schedule"])

    out = capsys.readouterr().out
    assert code == 1
    assert checks(out) == {"hourly schedule enabled": "FAIL"}
    assert f"FAIL  hourly schedule enabled: {schedule_disabled} DISABLED" in out


def test_ops_never_starts_a_sandbox_itself(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No sandbox runs: ``ops smoke --stage local`` says how to get one (ops imports nothing of ``local``)."""
    code = main(["smoke", "--stage", "local", "--sandbox-state", str(tmp_path / "none.json")])

    err = capsys.readouterr().err
    assert code == 2
    assert "no sandbox is running" in err and "make smoke STAGE=local" in err


def test_local_smoke_starts_a_sandbox_for_the_run_when_none_runs(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``make smoke STAGE=local`` (``python -m local smoke``) hands ops the starter: with no sandbox
    running, the suite runs against the one it starts (here the session's, standing in for a new one)."""
    import contextlib

    import local.smoke
    from local.__main__ import main as local_main

    started: list[Path] = []

    @contextlib.contextmanager
    def start(log_dir: Path, cdk_out: Path) -> Iterator[dict[str, object]]:
        started.append(cdk_out)
        yield sandbox.state()

    monkeypatch.setattr(local.smoke, "started_sandbox", start)
    code = local_main(
        ["smoke", "--stage", "local", "--sandbox-state", str(tmp_path / "none.json"), "--only", "stacks"]
    )

    out = capsys.readouterr().out
    assert code == 0, out
    assert len(started) == 1
    assert checks(out) == {"stacks": "PASS"}
    assert "a sandbox started for the run" in out
