"""Running a make target as CI's short form of it: the repo's Makefile, variables on the command line, output
captured, and the sandbox's arguments that keep a run off a developer's ports and ``.sandbox``."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from emulator.server import free_port
from local.demo_readme import ROOT

MAKE = shutil.which("make") or "make"
MAKEFILE = ROOT / "Makefile"


def make(
    target: str,
    *variables: str,
    cwd: Path = ROOT,
    timeout: float = 600,
    env: Mapping[str, str | None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``make TARGET VAR=value ...`` with the repo's Makefile (``-f``, so ``cwd`` may be a copy elsewhere);
    ``env`` adds to the environment, a None removing the variable."""
    environment = {**os.environ, **(env or {})}
    return subprocess.run(
        [MAKE, "-f", str(MAKEFILE), "--no-print-directory", target, *variables],
        cwd=cwd,
        env={name: value for name, value in environment.items() if value is not None},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def local_args(state_dir: Path) -> str:
    """LOCAL_ARGS for ``python -m local``: free ports, and everything it writes under ``state_dir``."""
    args = f"--emulator-port {free_port()} --api-port 0 --state-dir {state_dir}"
    if os.environ.get("RELAY_CDK_OUT"):
        args += f" --cdk-out {os.environ['RELAY_CDK_OUT']}"
    return args


def tail(run: subprocess.CompletedProcess[str], n: int = 4000) -> str:
    """The run's exit code, its FAIL lines wherever they are (a long output's tail may not hold
    them), then the ends of stdout and stderr."""
    failed = "\n".join(line for line in run.stdout.splitlines() if line.lstrip().startswith("FAIL "))
    return (
        f"exit {run.returncode}\n--- FAIL lines\n{failed or '(none)'}\n"
        f"--- stdout\n{run.stdout[-n:]}\n--- stderr\n{run.stderr[-n:]}"
    )
