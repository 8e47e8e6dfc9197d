"""``make demo``'s main job, run as a user runs it (``make demo``, the default 100 payments), on free ports
and with its transcript, logs and IAM report in a temporary folder (``LOCAL_ARGS="... --state-dir ..."``),
so a developer's sandbox and ``.sandbox/demo-output.txt`` are left alone: it must pass, inject its faults,
and print the lines the README's sample shows.

The README's sample comes from a real run's transcript (``python -m local readme-sample``); this test
fails when the demo of today prints other lines than that sample (its labels and checks, figures
aside), so a sample of an older demo cannot stay in the README."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from local.demo_readme import README, TRANSCRIPT, labels, readme_sample
from tests.demo.make_runs import local_args, make, tail

pytestmark = pytest.mark.e2e


def test_the_demo_passes_injects_its_faults_and_prints_what_the_readme_shows(tmp_path: Path) -> None:
    # DEMO_PAYMENTS unset: the demo's own default, as a user runs it.
    run = make("demo", f"LOCAL_ARGS={local_args(tmp_path)} --no-state", env={"DEMO_PAYMENTS": None})
    output = run.stdout
    assert run.returncode == 0, tail(run)
    injected = re.search(r"duplicate deliveries injected\s+(\d+)", output)
    assert injected is not None and int(injected[1]) == 10, output[-4000:]
    refused = re.search(r"legacy calls refused by the outage\s+(\d+)", output)
    assert refused is not None and int(refused[1]) > 0, output[-4000:]
    # Its transcript in the run's folder; the developer's, and the sandbox's state, untouched.
    ours = (tmp_path / TRANSCRIPT.name).read_text(encoding="utf-8")
    assert ours.strip() in output
    assert not TRANSCRIPT.exists() or TRANSCRIPT.read_text(encoding="utf-8") != ours
    assert not (tmp_path / "state.json").exists()
    shown = labels(readme_sample(README.read_text(encoding="utf-8")))
    printed = labels(output)
    missing = [line for line in shown if line not in printed]
    new = [line for line in printed if line not in shown]
    assert not missing and not new, (
        f"README.md's demo sample differs from what the demo prints now: shown, not printed {missing}; "
        f"printed, not shown {new}. Run make demo, then python -m local readme-sample, and commit README.md"
    )
