"""The sandbox's side of IAM enforcement: hand the model to the emulator, print denials as they happen,
and ``python -m local iam-report``: per function, the grants its traffic never used and the calls denied.

Least privilege as data: a grant no run has used is a candidate for removal (or a path no test drives),
and a denial is a missing grant, or a call the function should not make.
"""

from __future__ import annotations

import contextlib
import json
import threading
import urllib.request
from collections.abc import Callable
from typing import Any

from emulator.iam_enforcer import CONTROL_PREFIX
from emulator.provision import IamModel, Topology


def _call(endpoint: str, what: str, *, method: str = "GET", body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{endpoint}{CONTROL_PREFIX}{what}", data=data, method=method)
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def enforce(endpoint: str, topology: Topology, model: IamModel | None = None) -> dict[str, int]:
    """Give the emulator every function's role and the resource policies (``model``: another model
    than the templates', for a test that removes a grant); from now on each call a function makes is
    authorized. Returns the counts the emulator loaded."""
    document = (model or topology.iam).to_json()
    result: dict[str, int] = _call(endpoint, "model", method="PUT", body=document)
    return result


def service_may(endpoint: str, service: str, source_arn: str, action: str, resource: str) -> bool:
    """Does ``resource``'s policy let an AWS service (``events.amazonaws.com`` for a rule) act on it?
    The emulator decides and records a denial, as for SNS's deliveries."""
    ask = {"service": service, "sourceArn": source_arn, "action": action, "resource": resource}
    return bool(_call(endpoint, "service-call", method="POST", body=ask)["allowed"])


def bus_deliveries(endpoint: str) -> dict[str, dict[str, int]]:
    """Per bus rule, what the emulator did with the events it matched (``emulator.bus_delivery``)."""
    result: dict[str, dict[str, int]] = _call(endpoint, "bus")
    return result


def denials(endpoint: str) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = _call(endpoint, "denials")
    return result


def fetch_report(endpoint: str) -> dict[str, Any]:
    result: dict[str, Any] = _call(endpoint, "report")
    return result


class DenialWatcher:
    """Prints each denial once, as ``IAM denied: <function>: <action> on <resource> (<why>)``."""

    def __init__(self, endpoint: str, log: Callable[[str], None], interval: float = 1.0) -> None:
        self.endpoint = endpoint
        self.log = log
        self.interval = interval
        self.seen = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="iam-denials", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def poll(self) -> list[dict[str, Any]]:
        new = denials(self.endpoint)[self.seen :]
        self.seen += len(new)
        for d in new:
            self.log(f"IAM denied: {d['function']}: {d['action']} on {d['resource']} {d['reason']}")
        return new

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            # The emulator is stopping, or unreachable for a moment (a session's sandbox outlives its
            # tests): poll again next time.
            with contextlib.suppress(Exception):
                self.poll()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)


def format_report(report: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    total_unused = total_denied = 0
    for fn in sorted(report["functions"], key=lambda f: str(f["function"])):
        unused = [g for g in fn["grants"] if not g["uses"] and not g["action"].startswith("logs:")]
        used = [g for g in fn["grants"] if g["uses"]]
        calls = sum(fn["calls"].values())
        lines.append(f"{fn['function']}  ({calls} calls allowed, {len(used)} grants used)")
        for grant in unused:
            lines.append(f"  never used  {grant['action']:<34} {grant['resource']}")
        for call, count in sorted(fn["denied"].items()):
            lines.append(f"  DENIED ×{count:<4} {call}")
        total_unused += len(unused)
        total_denied += sum(fn["denied"].values())
    for call, count in sorted(report.get("serviceDenials", {}).items()):
        lines.append(f"DENIED ×{count:<4} {call}")
        total_denied += count
    lines.append(
        f"{len(report['functions'])} callers (functions, schedules): {total_unused} grants never used, "
        f"{total_denied} calls denied (logs:* grants are used by Lambda itself, not by the code, "
        "and are not listed)"
    )
    return lines
