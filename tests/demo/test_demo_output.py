"""``make demo``'s main job, run as a user runs it (``python -m local demo``, the default 100 payments), on
free ports: it must pass, inject its faults, and print the lines the README's sample shows.

The README's sample comes from a real run's transcript (``python -m local readme-sample``); this test
fails when the demo of today prints other lines than that sample (its labels and checks, figures
aside), so a sample of an older demo cannot stay in the README."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from emulator.server import free_port
from local.demo_readme import README, ROOT, labels, readme_sample

pytestmark = pytest.mark.e2e


def test_the_demo_passes_injects_its_faults_and_prints_what_the_readme_shows() -> None:
    command = [sys.executable, "-m", "local", "demo", "--emulator-port", str(free_port()), "--api-port", "0"]
    if os.environ.get("RELAY_CDK_OUT"):
        command += ["--cdk-out", os.environ["RELAY_CDK_OUT"]]
    env = {**os.environ, "DEMO_PAYMENTS": ""}
    env.pop("DEMO_PAYMENTS")
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    output = run.stdout
    assert run.returncode == 0, output[-4000:] + run.stderr[-2000:]
    injected = re.search(r"duplicate deliveries injected\s+(\d+)", output)
    assert injected is not None and int(injected[1]) == 10, output[-4000:]
    refused = re.search(r"legacy calls refused by the outage\s+(\d+)", output)
    assert refused is not None and int(refused[1]) > 0, output[-4000:]
    shown = labels(readme_sample(README.read_text(encoding="utf-8")))
    printed = labels(output)
    missing = [line for line in shown if line not in printed]
    new = [line for line in printed if line not in shown]
    assert not missing and not new, (
        f"README.md's demo sample differs from what the demo prints now: shown, not printed {missing}; "
        f"printed, not shown {new}. Run make demo, then python -m local readme-sample, and commit README.md"
    )
