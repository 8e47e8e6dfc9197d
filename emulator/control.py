"""The running sandbox's control endpoint: what ``python -m local fire-schedule`` talks to.

A loopback-only HTTP server on a free port, written into ``.sandbox/state.json`` as ``control``:

    POST /schedules/fire   {"name": "<schedule>"?, "scheduledTime": "2026-11-29T10:00:00Z"?, "wait": 60?}
                           -> 200 {"firings": [{schedule, scheduledTime, target, targetKind, eventId,
                                                messageId, error, deadLettered, deliveries?}]}
                           -> 404 {"message": ...} for an unknown schedule

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

from emulator.eventbridge import EventBridge


class ControlServer:
    def __init__(self, bridge: EventBridge, port: int = 0) -> None:
        self.bridge = bridge
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

    def start(self) -> str:
        control = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = None
                if self.path.rstrip("/") != "/schedules/fire":
                    status, answer = 404, {"message": f"no control route POST {self.path}"}
                elif not isinstance(body, dict):
                    status, answer = 400, {"message": "the body must be a JSON object"}
                else:
                    status, answer = control.fire(body)
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
