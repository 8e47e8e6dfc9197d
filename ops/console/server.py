"""The console's HTTP server: the standard library's ``http.server``, bound to 127.0.0.1 only, serving
the page and its assets (``ops/console/static``: no CDN, no build step) and the JSON the page reads.

Routes (GET unless said):

* ``/`` the page; ``/static/<file>`` its script and style sheet;
* ``/api/info``: the stage, the endpoint, whether redrive is allowed;
* ``/api/operations?q=&limit=``, ``/api/operations/<id>``, ``/api/operations/<id>/trace`` (the
  sandbox's spans of it, ``emulator.traces``); ``/api/orders?q=``, ``/api/orders/<id>``;
* ``/api/queues``: every queue and DLQ (``ops status``) with each DLQ's parked messages from the ledger;
  ``/api/queues/<dlq>/parked``;
* ``/api/alarms``: every alarm with its state and runbook commands (``ops status``);
* ``/api/iam``, ``/api/meter``: the sandbox's IAM report and request meter;
* ``/api/charts``: the samples taken while the console runs and the latency distribution;
* POST ``/api/redrive/dry-run``, POST ``/api/redrive``, ``/api/redrive/jobs/<id>``,
  POST ``/api/redrive/jobs/<id>/abort``; POST ``/api/replay/dry-run``, POST ``/api/replay``
  (``ops.console.jobs``).

Every bad request is a 4xx with ``{"error": ...}`` and changes nothing. A request whose Host is not this
console's (DNS rebinding) or a POST from another origin or not in JSON (a cross-site form) is refused.
"""

from __future__ import annotations

import json
import mimetypes
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from ops.app import App
from ops.console import views
from ops.console.jobs import Redrives, Refused, Replays

HOST = "127.0.0.1"
DEFAULT_PORT = 8600
STATIC = Path(__file__).resolve().parent / "static"
MAX_BODY = 16 * 1024
_ID = re.compile(r"^[A-Za-z0-9._:#@+=-]{1,200}$")


class BadRequest(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class Console:
    """One console on one stage. ``start()`` serves in a thread; ``url`` is where."""

    def __init__(
        self,
        app: App,
        *,
        port: int = DEFAULT_PORT,
        allow_redrive: bool = False,
        redrives: Redrives | None = None,
        replays: Replays | None = None,
        history_interval: float = 5.0,
    ) -> None:
        self.app = app
        self.redrives = redrives or Redrives(app, allowed=allow_redrive)
        self.replays = replays or Replays(app, allowed=self.redrives.allowed)
        self.history = views.History(app, interval=history_interval)
        self.server = _bind(port)
        self.server.console = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self.server.serve_forever, name="console", daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/"

    def start(self) -> Console:
        self._thread.start()
        self.history.start()
        return self

    def close(self) -> None:
        self.history.close()
        self.server.shutdown()
        self.server.server_close()

    def banner(self) -> str:
        mode = (
            "redrive and replay allowed (dry run, reason and confirm required)"
            if self.redrives.allowed
            else "read-only; --console-allow-redrive lets it redrive and replay"
        )
        return f"console:  {self.url}   ({mode})"


def _bind(port: int) -> ThreadingHTTPServer:
    """The port asked for; a free one when it is taken (two sandboxes side by side), or when 0."""
    try:
        server = ThreadingHTTPServer((HOST, port), Handler)
    except OSError:
        if port == 0:
            raise
        server = ThreadingHTTPServer((HOST, 0), Handler)
    server.daemon_threads = True
    return server


class Handler(BaseHTTPRequestHandler):
    server_version = "RelayConsole/1"
    protocol_version = "HTTP/1.1"

    @property
    def console(self) -> Console:
        console: Console = self.server.console  # type: ignore[attr-defined]
        return console

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the sandbox's terminal is for the sandbox; the page shows what happened

    # dispatch -------------------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _handle(self, method: str) -> None:
        try:
            self._check_host()
            url = urlsplit(self.path)
            path = url.path
            if method == "GET" and not path.startswith("/api/"):
                self._static(path)
                return
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            body = self._body() if method == "POST" else {}
            status, document = self._route(method, path, query, body)
            self._json(status, document)
        except BadRequest as exc:
            self._json(exc.status, {"error": str(exc)})
        except Refused as exc:
            self._json(exc.status, {"error": str(exc)})
        except views.NotFound as exc:
            self._json(404, {"error": str(exc)})
        except Exception as exc:  # the stage failed us (emulator down, AWS refused): 502, said as such
            self._json(502, {"error": f"the stage did not answer as expected: {type(exc).__name__}: {exc}"})

    def _check_host(self) -> None:
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]")
        if host not in ("127.0.0.1", "localhost"):
            raise BadRequest(f"Host {host!r} is not this console's (it answers on 127.0.0.1 only)", 421)

    def _body(self) -> dict[str, Any]:
        origin = self.headers.get("Origin")
        if origin and urlsplit(origin).hostname not in ("127.0.0.1", "localhost"):
            raise BadRequest(f"a POST from {origin} is refused: the console takes its own page's only", 403)
        if (self.headers.get("Content-Type") or "").split(";")[0].strip() != "application/json":
            raise BadRequest("a POST takes a JSON body (Content-Type: application/json)", 415)
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise BadRequest("Content-Length is not a number") from None
        if length > MAX_BODY:
            raise BadRequest(f"the body is over {MAX_BODY} bytes", 413)
        raw = self.rfile.read(length) if length > 0 else b""
        try:
            document = json.loads(raw or b"{}")
        except ValueError as exc:
            raise BadRequest(f"the body is not JSON: {exc}") from None
        if not isinstance(document, dict):
            raise BadRequest("the body must be a JSON object")
        return document

    def _route(self, method: str, path: str, query: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        app, redrives = self.console.app, self.console.redrives
        parts = [unquote(p) for p in path.strip("/").split("/")][1:]  # after "api"
        get = method == "GET"
        match parts:
            case ["info"] if get:
                return 200, {
                    "stage": app.stage,
                    "prefix": app.prefix,
                    "endpoint": app.endpoint_url,
                    "local": app.is_local,
                    "redriveAllowed": redrives.allowed,
                    "replayAllowed": self.console.replays.allowed,
                }
            case ["operations"] if get:
                return 200, views.operations(app, _text(query, "q"), _limit(query))
            case ["operations", operation_id] if get:
                return 200, views.operation(app, _id(operation_id, "operation id"))
            case ["operations", operation_id, "trace"] if get:
                return 200, views.trace(app, _id(operation_id, "operation id"))
            case ["orders"] if get:
                return 200, views.orders(app, _text(query, "q"), _limit(query))
            case ["orders", order_id] if get:
                return 200, views.order(app, _id(order_id, "order id"))
            case ["queues"] if get:
                return 200, views.queues(app)
            case ["queues", name, "parked"] if get:
                return 200, views.parked(app, _id(name, "DLQ name"))
            case ["alarms"] if get:
                return 200, views.alarms(app)
            case ["iam"] if get:
                return 200, views.iam(app)
            case ["meter"] if get:
                return 200, views.meter(app)
            case ["charts"] if get:
                return 200, {"samples": self.console.history.points(), "latency": views.latency(app)}
            case ["redrive", "dry-run"] if method == "POST":
                return 200, redrives.dry_run(body)
            case ["redrive"] if method == "POST":
                return 202, redrives.start(body).to_json()
            case ["redrive", "jobs", job_id] if get:
                return 200, redrives.job(job_id).to_json()
            case ["redrive", "jobs", job_id, "abort"] if method == "POST":
                return 202, redrives.abort(job_id).to_json()
            case ["replay", "dry-run"] if method == "POST":
                return 200, self.console.replays.dry_run(body)
            case ["replay"] if method == "POST":
                return 200, self.console.replays.run(body)
        known = _known(parts)
        if known:
            raise BadRequest(f"{method} is not allowed on {path} (allowed: {', '.join(known)})", 405)
        raise BadRequest(f"no such page: {path}", 404)

    # answers ---------------------------------------------------------------------------------------

    def _static(self, path: str) -> None:
        if path in ("/", "/index.html"):
            name = "index.html"
        elif path.startswith("/static/"):
            name = path.removeprefix("/static/")
        else:
            raise BadRequest(f"no such page: {path}", 404)
        if not re.fullmatch(r"[a-z0-9_-]+\.(html|js|css|svg)", name):
            raise BadRequest(f"no such asset: {name}", 404)
        file = STATIC / name
        if not file.is_file():
            raise BadRequest(f"no such asset: {name}", 404)
        data = file.read_bytes()
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        self._send(200, data, f"{kind}; charset=utf-8")

    def _json(self, status: int, document: Any) -> None:
        self._send(status, json.dumps(document, default=str).encode(), "application/json; charset=utf-8")

    def _send(self, status: int, data: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header(
            "Content-Security-Policy",
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
            "connect-src 'self'; frame-ancestors 'none'",
        )
        self.end_headers()
        self.wfile.write(data)


_ROUTES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("info",), ("GET",)),
    (("operations",), ("GET",)),
    (("operations", "*"), ("GET",)),
    (("operations", "*", "trace"), ("GET",)),
    (("orders",), ("GET",)),
    (("orders", "*"), ("GET",)),
    (("queues",), ("GET",)),
    (("queues", "*", "parked"), ("GET",)),
    (("alarms",), ("GET",)),
    (("iam",), ("GET",)),
    (("meter",), ("GET",)),
    (("charts",), ("GET",)),
    (("redrive", "dry-run"), ("POST",)),
    (("redrive",), ("POST",)),
    (("redrive", "jobs", "*"), ("GET",)),
    (("redrive", "jobs", "*", "abort"), ("POST",)),
    (("replay", "dry-run"), ("POST",)),
    (("replay",), ("POST",)),
)


def _known(parts: list[str]) -> list[str]:
    """The methods a path takes, when it is one of the routes (for a 405)."""
    for pattern, methods in _ROUTES:
        if len(pattern) == len(parts) and all(p in ("*", q) for p, q in zip(pattern, parts, strict=True)):
            return list(methods)
    return []


def _text(query: dict[str, str], name: str) -> str:
    value = query.get(name, "").strip()
    if len(value) > 200:
        raise BadRequest(f"{name}: at most 200 characters")
    if value and not _ID.match(value):
        raise BadRequest(f"{name}: an id or a correlation id (letters, digits and ._:#@+=-), not {value!r}")
    return value


def _id(value: str, what: str) -> str:
    if not _ID.match(value):
        raise BadRequest(f"{what}: letters, digits and ._:#@+=- only (at most 200), not {value[:60]!r}")
    return value


def _limit(query: dict[str, str]) -> int:
    text = query.get("limit", "100")
    if not text.isdigit() or not 1 <= int(text) <= 1000:
        raise BadRequest(f"limit: a whole number from 1 to 1000, not {text!r}")
    return int(text)
