"""The running sandbox's control endpoint: what ``python -m local fire-schedule`` talks to.

A loopback-only HTTP server on a free port, written into ``.sandbox/state.json`` as ``control``:

    POST /schedules/fire   {"name": "<schedule>"?, "scheduledTime": "2026-11-29T10:00:00Z"?, "wait": 60?}
                           -> 200 {"firings": [{schedule, scheduledTime, target, targetKind, eventId,
                                                messageId, error, deadLettered, deliveries?}]}
                           -> 404 {"message": ...} for an unknown schedule

    POST /alarms/evaluate  {"advance": 61?}
                           -> 200 {"now": "2026-12-07T10:01:02.000+00:00", "transitions": [{alarm, old, new,
                                   reason, notified}], "failedActions": [...], "notUnderstood": {...}}
                           -> 400 {"message": ...} for a negative or non-numeric advance

``/alarms/evaluate`` evaluates every CloudWatch alarm now (``emulator.alarm_service``), after moving the
stage's clock on by ``advance`` seconds: what a test (or an operator rehearsing a runbook entry) runs
instead of waiting for a period to end.

``targetKind`` is ``"event-bus"`` (``eventId`` set, ``deliveries`` the rule targets' outcomes when
``wait`` is given) or ``"sqs"`` (``messageId`` set, ``deliveries`` always empty: no rule sees it).

It is not part of the app (AWS has no such API; the console's "run now" does not exist for
Scheduler either), so it lives on its own port, away from the app's HTTP API routes.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from emulator.alarm_service import AlarmService
from emulator.eventbridge import EventBridge


class ControlServer:
    def __init__(self, bridge: EventBridge, port: int = 0, *, alarms: AlarmService | None = None) -> None:
        self.bridge = bridge
        self.alarms = alarms
        self.port = port
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def fire(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        wait = body.get("wait")
        try:
            firings = self.bridge.fire_schedule(body.get("name"), body.get("scheduledTime"))
        except KeyError as exc:
            return 404, {"message": str(exc.args[0])}
        except ValueError as exc:
            return 400, {"message": f"scheduledTime: {exc}"}
        return 200, {"firings": [f.to_json(wait=float(wait) if wait else None) for f in firings]}

    def evaluate_alarms(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if self.alarms is None:
            return 404, {"message": "this stage evaluates no alarms"}
        advance = body.get("advance", 0)
        if isinstance(advance, bool) or not isinstance(advance, int | float) or advance < 0:
            return 400, {"message": f"advance: {advance!r} is not a number of seconds >= 0"}
        changes = self.alarms.evaluate(advance=float(advance))
        evaluator = self.alarms.evaluator
        return 200, {
            "now": self.alarms.now().isoformat(timespec="milliseconds"),
            "transitions": [
                {"alarm": c.alarm, "old": c.old, "new": c.new, "reason": c.reason, "notified": [*c.notified]}
                for c in changes
            ],
            "failedActions": list(evaluator.failed_actions),
            "notUnderstood": dict(evaluator.not_understood),
        }

    def start(self) -> str:
        routes = {"/schedules/fire": self.fire, "/alarms/evaluate": self.evaluate_alarms}

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = None
                route = routes.get(self.path.rstrip("/"))
                if route is None:
                    status, answer = 404, {"message": f"no control route POST {self.path}"}
                elif not isinstance(body, dict):
                    status, answer = 400, {"message": "the body must be a JSON object"}
                else:
                    status, answer = route(body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self.port = int(server.server_address[1])
        self._server = server
        threading.Thread(target=server.serve_forever, name="control", daemon=True).start()
        return self.url

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def evaluate_alarms_remote(control_url: str, advance: float = 0.0) -> tuple[int, dict[str, Any]]:
    """Ask a running sandbox to evaluate its alarms now, its clock moved on by ``advance`` seconds."""
    request = urllib.request.Request(
        f"{control_url}/alarms/evaluate",
        data=json.dumps({"advance": advance}).encode(),
        method="POST",
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return int(response.status), dict(json.loads(response.read()))
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, dict(json.loads(exc.read() or b"{}"))


def fire_remote(
    control_url: str, name: str | None, scheduled_time: str | None, wait: float
) -> tuple[int, dict[str, Any]]:
    """Ask a running sandbox to fire a schedule (the CLI side)."""
    body = {"name": name, "scheduledTime": scheduled_time, "wait": wait}
    request = urllib.request.Request(
        f"{control_url}/schedules/fire",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=wait + 30) as response:
            return int(response.status), dict(json.loads(response.read()))
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, dict(json.loads(exc.read() or b"{}"))
