"""``python -m local smoke``: ``ops smoke`` against the sandbox, starting one for the run when none runs.

``make smoke STAGE=local`` runs this. The suite itself is ``ops.smoke`` (it checks a deployed stage the
same way); starting a sandbox is Relay's sandbox's business, so it lives here and is handed to the suite.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from emulator.server import free_port
from local.sandbox import Sandbox, SandboxConfig
from ops import smoke
from ops.app import OpsError
from ops.paths import use_function_code


@contextmanager
def started_sandbox(log_dir: Path, cdk_out: Path) -> Iterator[dict[str, Any]]:
    """A sandbox started for the run on free ports (as the e2e tests start theirs), stopped after it;
    its start-up lines go to ``log_dir/sandbox.log``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    with (log_dir / "sandbox.log").open("a", encoding="utf-8") as log:

        def write(*parts: object) -> None:
            log.write(" ".join(str(p) for p in parts) + "\n")
            log.flush()

        config = SandboxConfig(
            emulator_port=free_port(),
            api_port=0,
            cdk_out=cdk_out,
            write_state=False,
            log_dir=log_dir / "logs",
        )
        try:
            sandbox = Sandbox(config, log=write).start()
        except Exception as exc:
            raise smoke.Unreachable(
                f"no sandbox was running, and one could not be started: {type(exc).__name__}: {exc} "
                f"(its log: {log_dir / 'sandbox.log'})"
            ) from None
        try:
            yield sandbox.state()
        finally:
            sandbox.close()


def main(argv: Sequence[str]) -> int:
    """The same command line as ``python -m ops smoke`` (``--stage local`` by default)."""
    use_function_code()
    parser = argparse.ArgumentParser(prog="python -m local smoke")
    commands = parser.add_subparsers(dest="command", required=True)
    smoke.register(commands)
    args = parser.parse_args(["smoke", *(argv or ["--stage", smoke.LOCAL_STAGE])])
    try:
        return smoke.run(args, started_sandbox)
    except OpsError as exc:  # the stage cannot be reached (smoke.Unreachable), or a bad argument
        print(f"error: {exc}", file=sys.stderr)
        return 2
