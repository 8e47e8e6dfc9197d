"""How `make pytest` spreads the suite over pytest-xdist workers (`-n 4`): by test, except where tests share
something costly to build, which one worker builds once.

- tests/e2e share a session-scoped sandbox (tests/e2e/conftest.py: moto server, worker processes, ~10 s
  to start). They form two scopes, each on one worker with one sandbox: the modules that drive the API
  from outside (schemathesis, the callers' walk, the README's client, the smoke suite) and the rest. Two
  sandboxes side by side halve the e2e time; each test isolates its data by its own ids either way.
- tests/chaos starts a sandbox of its own (its time scale and faults must not reach the e2e one): a scope.
- tests/examples runs the example app (examples/your-first-flow) on an emulator stage of its own: a scope.
- tests/console drives the operations console in Chromium on a sandbox of its own: a scope.
- tests/infra synthesize the whole app in process once per worker (session fixtures, jsii): one scope.

The sandboxes mostly wait on their own latency rather than on a core, so four workers keep two cores busy.
But a sandbox keeps time as AWS does (visibility and function timeouts, the chaos run's scaled clock): four
of them side by side on two cores, beside mypy and checkov, starved each other until functions timed out
and messages went to their DLQs with no reason (CI at aa36708: 9 failures, 46 min). So the work that
starts a sandbox (`starts_a_sandbox`) runs on the first `LANES` workers only, one unit after another on
each, and the other workers take the in-process tests, at a lower CPU priority (`NICE`, set by
tests/conftest.py) so that a sandbox's clock is not starved by them.

Why a scheduler and not `--dist loadgroup` with `xdist_group` marks: with pytest 9.2, pytest-xdist 3.8's
loadgroup no longer groups anything (it appends the group to `item._nodeid`, which pytest's structured node
ids ignore: pytest-dev/pytest-xdist#1386), and the tests are spread one by one with no error. This
scheduler reads the scope from the test's path, which needs no change to the node id.
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling

E2E_API = frozenset(
    {"test_schemathesis_e2e.py", "test_callers_e2e.py", "test_readme_client_e2e.py", "test_smoke_e2e.py"}
)


def scope_of(nodeid: str) -> str:
    """The work unit a test belongs to: a shared scope's name, or the test's own id."""
    parts = nodeid.split("::", 1)[0].split("/")
    if len(parts) < 3 or parts[0] != "tests":
        return nodeid
    folder, module = parts[1], parts[-1]
    if folder == "e2e":
        return "e2e-api" if module in E2E_API else "e2e"
    if folder in ("chaos", "infra", "examples", "console"):
        return folder
    return nodeid


# The demo as `make demo` runs it (a minute, a sandbox of its own).
DEMO = "tests/demo/"
# Known to take long on their own (tests/durations in the README's profile), started first.
SLOW = ("tests/handlers/payments/test_payments_pipeline.py", "tests/handlers/orders/test_orders_pipeline.py")


# The scopes that run on a sandbox or an emulator stage of their own.
SANDBOX_SCOPES = frozenset({"chaos", "e2e", "e2e-api", "examples", "console"})
# The demo's make targets that start a sandbox (`make bench` includes the sandbox bench).
SANDBOX_TARGETS = (
    "tests/demo/test_make_sandbox_targets.py",
    "tests/demo/test_make_targets.py::test_make_bench",
)
# How many workers run the sandboxes: two cores, two sandboxes at a time.
LANES = 2
# The other workers' CPU priority (os.nice): below the sandboxes, whose clocks are real.
NICE = 10


def starts_a_sandbox(nodeid: str) -> bool:
    """Whether the test (or its scope) runs a sandbox or an emulator stage: a lane's work."""
    demo = (DEMO + "test_demo_output.py", *SANDBOX_TARGETS)
    return scope_of(nodeid) in SANDBOX_SCOPES or nodeid.startswith(demo)


def is_lane(worker_id: str) -> bool:
    """Whether an xdist worker (``gw0``, ``gw1``, ...) is one of the `LANES` that run the sandboxes."""
    return worker_id.startswith("gw") and worker_id[2:].isdigit() and int(worker_id[2:]) < LANES


def rank(nodeid: str) -> int:
    """Longest work first, so no worker picks up a long unit near the end: chaos (one test, minutes), the
    two e2e scopes and the example's stage, the handlers' pipeline tests, infra (one synth, then many
    quick tests), the rest."""
    scope = scope_of(nodeid)
    if scope in SANDBOX_SCOPES or nodeid.startswith(DEMO):
        return 0
    if nodeid.startswith(SLOW):
        return 1
    return 2 if scope == "infra" else 3


def order(items: list[Any]) -> None:
    """`items` sorted by `rank` in place (stable: the collection's order within a rank). Only the workers
    call it (`tests/conftest.py`), so a serial run keeps the collection's order."""
    items.sort(key=lambda item: rank(item.nodeid))


class SandboxScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """xdist's load-by-scope scheduling (a scope runs whole on one worker), with the scopes of `scope_of`,
    handed out in the workers' collection order, which `order` made longest first (xdist's own order,
    the largest scope first, would queue chaos behind the many single tests)."""

    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        super().__init__(config, log)
        config.option.loadscopereorder = False

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)

    def _takes(self, node: Any, scope: str) -> bool:
        return is_lane(node.gateway.id) or not starts_a_sandbox(scope)

    def _assign_work_unit(self, node: Any) -> None:
        """The first unit in the queue this worker may take (a lane: any; another worker: one that starts
        no sandbox); a worker left with none is shut down, and the lanes finish the queue."""
        scope = next((s for s in self.workqueue if self._takes(node, s)), None)
        if scope is None:
            if not node.shutting_down:
                node.shutdown()
            return
        self.workqueue.move_to_end(scope, last=False)
        super()._assign_work_unit(node)

    def _reschedule(self, node: Any) -> None:
        if node.shutting_down:
            return
        if not any(self._takes(node, s) for s in self.workqueue):
            node.shutdown()  # nothing in the queue for this worker: it stops once its own work is done
            return
        super()._reschedule(node)
