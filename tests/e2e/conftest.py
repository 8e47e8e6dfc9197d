"""One sandbox per test session (per xdist worker: `make pytest` runs the e2e tests as two scopes, a
sandbox each, tests/scheduling.py), on free ports, so e2e tests never clash with a running `make local`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from emulator.server import free_port
from local.sandbox import Sandbox, SandboxConfig


def sandbox_config(
    tmp_path_factory: pytest.TempPathFactory, logs: str, *, trace_everything: bool = False
) -> SandboxConfig:
    """A test sandbox's config: free ports, no state file, logs in a temporary folder, and the cloud
    assembly ``RELAY_CDK_OUT`` names when set. The templates' trace sampling unless ``trace_everything``
    (the console's tests draw traces)."""
    config = SandboxConfig(
        emulator_port=free_port(),
        api_port=0,
        write_state=False,
        log_dir=tmp_path_factory.mktemp(logs),
        trace_everything=trace_everything,
    )
    if os.environ.get("RELAY_CDK_OUT"):
        config.cdk_out = Path(os.environ["RELAY_CDK_OUT"]).resolve()
    return config


# Package-scoped: stopped once this worker has run the package's tests, so an idle sandbox (its pollers and
# alarm evaluation: ~15 % of a core) does not run on beside the lane's next one (tests/scheduling.py).
@pytest.fixture(scope="package")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    with Sandbox(sandbox_config(tmp_path_factory, "sandbox-logs"), log=lambda *_: None) as running:
        yield running
        nothing_left_behind(running)


def nothing_left_behind(sb: Sandbox) -> None:
    """After every e2e test: the sweeper, fired once, leaves no operation non-terminal past its
    deadline and no outbox row unpublished past its grace (issue 14's "done when")."""
    from local import lifecycle

    lifecycle.sweep_now(sb)
    left = lifecycle.stranded(sb.endpoint, lifecycle.operations_table(sb.topology.tables))
    assert not left, f"left behind after the e2e run: {dict(left)}"


@pytest.fixture(autouse=True)
def no_iam_denials(request: pytest.FixtureRequest) -> Iterator[None]:
    """IAM is enforced in the sandbox: a call AWS would deny fails the test that made it, with the
    denial, unless the test is about denials (``@pytest.mark.iam_denials``)."""
    if "sandbox" not in request.fixturenames or request.node.get_closest_marker("iam_denials"):
        yield
        return
    from emulator.iam_report import denials

    running: Sandbox = request.getfixturevalue("sandbox")
    before = len(denials(running.endpoint))
    yield
    new = denials(running.endpoint)[before:]
    assert not new, "calls denied by IAM (missing grants?):\n" + "\n".join(
        f"  {d['function']}: {d['action']} on {d['resource']} {d['reason']}" for d in new
    )
