"""The shared base of the external-system fakes: a real HTTP server on 127.0.0.1 with fault knobs.

Each fake runs a ``ThreadingHTTPServer`` in a daemon thread, records every call, and injects the
failures that a reliability scenario needs (latency, timeouts, 5xx, 429, outage, a reply lost
after the side effect committed). Faults other than ``fail_after_commit_rate`` are decided BEFORE
the request reaches the fake's business logic, so a failed call never has an effect; that is what
lets a test assert "exactly one charge" after any number of retries.

Knobs change at run time (``set_knobs`` or ``POST /_admin/knobs``) so a test can start and end an
outage in the middle of a run.
"""

import dataclasses
import hashlib
import json
import random
import threading
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Self
from urllib.parse import parse_qs, unquote, urlsplit

JsonObject = dict[str, Any]

FAIL_AFTER_COMMIT_MODES = ("500", "drop", "hang")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class KnobError(ValueError):
    """A knob name or value the fake does not understand."""


@dataclass(frozen=True)
class FaultKnobs:
    """Faults every fake can inject. Rates are probabilities in [0, 1], drawn per call."""

    latency_ms: int = 0
    """Added to every business call before anything else happens."""
    timeout_rate: float = 0.0
    """Share of calls that hang for ``timeout_sleep_s`` and then answer 504, with no effect."""
    timeout_sleep_s: float = 30.0
    """How long a 'timed out' call hangs; longer than the caller's client timeout."""
    fail_rate_5xx: float = 0.0
    """Share of calls answered 503 with no effect."""
    fail_rate_429: float = 0.0
    """Share of calls answered 429 (with ``Retry-After``) with no effect."""
    retry_after_s: int = 1
    """The ``Retry-After`` header value on 429 answers."""
    outage: bool = False
    """Every business call answers 503 until turned off."""
    fail_after_commit_rate: float = 0.0
    """Share of POSTs whose effect IS committed but whose reply is lost (500 or a dropped connection)."""
    fail_after_commit_mode: str = "500"
    """How the reply is lost: ``"500"`` (an error reply), ``"drop"`` (connection closed, no reply) or
    ``"hang"`` (no reply for ``timeout_sleep_s``, then closed: the caller's own timeout fires, in real
    time, while the effect is already committed)."""
    seed: int | None = None
    """Seeds the fault draws, so a run with the same seed and calls fails the same calls."""

    def __post_init__(self) -> None:
        for name in ("timeout_rate", "fail_rate_5xx", "fail_rate_429", "fail_after_commit_rate"):
            rate = getattr(self, name)
            if not 0.0 <= rate <= 1.0:
                raise KnobError(f"knob {name}={rate} is not a probability; use a value from 0 to 1")
        for name in ("latency_ms", "timeout_sleep_s", "retry_after_s"):
            if getattr(self, name) < 0:
                raise KnobError(f"knob {name}={getattr(self, name)} is negative")
        if self.fail_after_commit_mode not in FAIL_AFTER_COMMIT_MODES:
            raise KnobError(
                f"knob fail_after_commit_mode={self.fail_after_commit_mode!r} is unknown; "
                f"use one of {', '.join(FAIL_AFTER_COMMIT_MODES)}"
            )

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied; values may be strings (CLI, env) or JSON values."""
        hints = typing.get_type_hints(type(self))
        unknown = sorted(set(changes) - set(self.names()))
        if unknown:
            raise KnobError(f"unknown knob(s) {', '.join(unknown)}; known: {', '.join(self.names())}")
        coerced = {name: _coerce(name, hints[name], value) for name, value in changes.items()}
        return dataclasses.replace(self, **coerced)

    def to_json(self) -> JsonObject:
        return {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}


def knobs_from_env[K: FaultKnobs](knobs_type: type[K], environ: Mapping[str, str]) -> dict[str, str]:
    """Knob settings found in ``FAKE_<NAME>`` variables, e.g. ``FAKE_FAIL_RATE_5XX=0.2``."""
    found = {}
    for name in knobs_type.names():
        env_name = f"FAKE_{name.upper()}"
        if env_name in environ:
            found[name] = environ[env_name]
    return found


def _coerce(name: str, tp: Any, value: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
            return None
        (inner,) = (arg for arg in typing.get_args(tp) if arg is not type(None))
        return _coerce(name, inner, value)
    try:
        if tp is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in _TRUE | _FALSE:
                return text in _TRUE
            raise ValueError(value)
        if tp is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            return int(value)
        if tp is float:
            if isinstance(value, bool):
                raise ValueError(value)
            return float(value)
        if tp is str:
            return str(value)
        if tp is Decimal:
            number = Decimal(str(value))
            if not number.is_finite():
                raise ValueError(value)
            return number
        if typing.get_origin(tp) is frozenset:
            items = value.split(",") if isinstance(value, str) else value
            if not isinstance(items, list | tuple | set | frozenset):
                raise ValueError(value)
            return frozenset(str(item).strip() for item in items if str(item).strip())
    except (ValueError, TypeError, InvalidOperation) as exc:
        raise KnobError(f"knob {name}={value!r} is not a valid {getattr(tp, '__name__', tp)}") from exc
    raise KnobError(f"knob {name} has a type the fakes cannot parse: {tp}")


def _jsonable(value: Any) -> Any:
    if isinstance(value, frozenset):
        return sorted(value)
    if isinstance(value, Decimal):
        return str(value)
    return value


def fingerprint(body: Any) -> str:
    """sha256 of the canonical JSON of a request body: how 'same key, different body' is detected."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: Mapping[str, str]
    """Header names in lower case."""
    body: bytes

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @property
    def idempotency_key(self) -> str | None:
        key = (self.header("Idempotency-Key") or "").strip()
        return key or None

    @property
    def segments(self) -> list[str]:
        """The path split on ``/`` and then percent-decoded, so a key may contain ``/`` as ``%2F``."""
        return [unquote(part) for part in self.path.strip("/").split("/")]

    def json(self) -> Any:
        """The body parsed as JSON; raises ``ValueError`` if it is not JSON."""
        return json.loads(self.body.decode("utf-8")) if self.body else None


@dataclass(frozen=True)
class Response:
    status: int
    body: JsonObject | list[Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    drop: bool = False
    """Close the connection without any reply (a lost response)."""


def json_response(status: int, body: JsonObject | list[Any], **headers: str) -> Response:
    return Response(status=status, body=body, headers=headers)


def error_response(status: int, error: str, message: str, **extra: Any) -> Response:
    return Response(status=status, body={"error": error, "message": message, **extra})


class Keyed(typing.Protocol):
    """What ``OncePerKey`` keeps per key: the request's fingerprint and the record's JSON."""

    fingerprint: str

    def to_json(self) -> JsonObject: ...


@dataclass(frozen=True)
class Refusal:
    """A business refusal of a key's request: recorded once, final for the key."""

    key: str
    fingerprint: str
    reason: str
    error: str  # InvoiceRefused, ShipmentRefused
    what: str  # invoice, shipment
    not_done: str  # issued, created

    def response(self) -> Response:
        return error_response(
            422,
            self.error,
            f"the {self.what} for Idempotency-Key {self.key} was refused ({self.reason}); nothing was "
            f"{self.not_done}, and a retry with this key gets the same answer",
            reason=self.reason,
            idempotencyKey=self.key,
        )


class OncePerKey[T: Keyed]:
    """At most one record per ``Idempotency-Key``, and a refusal final for its key: the keyed create
    the partner APIs share (the invoice API, the shipping API). ``create`` answers 201 for a new key,
    200 with the same record for the same body, 422 ``IdempotencyKeyReused`` for another body, and a
    refusal's 422 again for a refused key, whatever the knobs say by then. The fake holds its lock."""

    def __init__(self, *, what: str, route: str, refused_error: str, not_done: str, id_of: Any) -> None:
        self.what, self.route, self.refused_error, self.not_done = what, route, refused_error, not_done
        self.id_of: typing.Callable[[T], str] = id_of
        self.by_key: dict[str, T] = {}
        self.refusals: dict[str, Refusal] = {}

    def reasons(self) -> dict[str, str]:
        return {key: refusal.reason for key, refusal in self.refusals.items()}

    def clear(self) -> None:
        self.by_key.clear()
        self.refusals.clear()

    def parse(
        self, request: Request, validate: typing.Callable[[Any], dict[str, str]]
    ) -> Response | tuple[str, JsonObject]:
        """The key and the body of a valid request, else its 400."""
        key = request.idempotency_key
        if key is None:
            return error_response(
                400, "IdempotencyKeyMissing", f"POST {self.route} requires an Idempotency-Key header"
            )
        try:
            body = request.json()
        except ValueError:
            return error_response(400, "InvalidJson", "the body is not JSON")
        errors = validate(body)
        if errors:
            return error_response(
                400, "ValidationError", f"the {self.what} request is invalid", fields=errors
            )
        return key, body

    def create(
        self,
        key: str,
        body: JsonObject,
        *,
        refusal_reason: typing.Callable[[], str | None],
        make: typing.Callable[[str], T],
    ) -> Response:
        """The answer for ``key`` and ``body``; ``make(digest)`` records a new one (the caller counts it)."""
        digest = fingerprint(body)
        existing = self.by_key.get(key)
        if existing is not None:
            if existing.fingerprint != digest:
                return error_response(
                    422,
                    "IdempotencyKeyReused",
                    f"Idempotency-Key {key} was already used with a different request body; "
                    f"{self.what} {self.id_of(existing)} was not changed. Use a new key for a new "
                    f"{self.what}.",
                    idempotencyKey=key,
                )
            return json_response(200, existing.to_json())
        refused = self.refusals.get(key)
        if refused is not None:
            if refused.fingerprint != digest:
                return error_response(
                    422,
                    "IdempotencyKeyReused",
                    f"Idempotency-Key {key} was already used with a different request body (and "
                    f"refused); nothing was {self.not_done}. Use a new key for a new {self.what}.",
                    idempotencyKey=key,
                )
            return refused.response()
        reason = refusal_reason()
        if reason is not None:
            # Decided once per key, so a repeat answers the same whatever the knobs say by then.
            refusal = Refusal(key, digest, reason, self.refused_error, self.what, self.not_done)
            self.refusals[key] = refusal
            return refusal.response()
        record = make(digest)
        self.by_key[key] = record
        return json_response(201, record.to_json(), Location=f"{self.route}/{self.id_of(record)}")


@dataclass
class CallRecord:
    method: str
    path: str
    key: str | None
    at: str
    status: int | None = None
    """The status returned; ``None`` while the call is in progress or when the reply was dropped."""
    fault: str | None = None
    """The injected fault, if any: outage, timeout, 5xx, 429, fail_after_commit, hang_after_commit."""

    def to_json(self) -> JsonObject:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class _FaultDraw:
    timeout: bool
    fail_5xx: bool
    fail_429: bool
    fail_after_commit: bool


class FakeService[K: FaultKnobs]:
    """A fake external system: start it, point the code under test at ``base_url``, inspect it.

    Subclasses implement ``handle`` (business routes), ``reset_state`` and optionally
    ``admin_views`` (extra ``GET /_admin/<name>`` read models).
    """

    name: ClassVar[str] = "fake"
    knobs_type: ClassVar[type[FaultKnobs]] = FaultKnobs

    def __init__(self, knobs: K | None = None, *, host: str = "127.0.0.1", port: int = 0, quiet: bool = True):
        self._initial_knobs: K = knobs if knobs is not None else typing.cast(K, self.knobs_type())
        self._knobs: K = self._initial_knobs
        self._rng = random.Random(self._knobs.seed)
        self._lock = threading.Lock()
        self._calls: list[CallRecord] = []
        self._stopping = threading.Event()
        self._host = host
        self._port = port
        self.quiet = quiet
        self._server: _FakeHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle ---------------------------------------------------------------------------------

    def start(self) -> str:
        """Start serving in a daemon thread; returns the base URL (``http://127.0.0.1:<port>``)."""
        if self._server is not None:
            return self.base_url
        self._stopping.clear()
        server = _FakeHTTPServer((self._host, self._port), _Handler, self)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=f"{self.name}-fake", daemon=True
        )
        self._thread.start()
        return self.base_url

    def stop(self) -> None:
        """Stop serving. Calls hanging in a timeout or latency fault are released at once."""
        if self._server is None:
            return
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError(f"the {self.name} fake is not running; call start() first")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    # inspection and control --------------------------------------------------------------------

    @property
    def knobs(self) -> K:
        with self._lock:
            return self._knobs

    def set_knobs(self, **changes: Any) -> K:
        """Change knobs at run time; values may be typed or strings. Setting ``seed`` re-seeds."""
        with self._lock:
            self._knobs = self._knobs.replace(**changes)
            if "seed" in changes:
                self._rng = random.Random(self._knobs.seed)
            return self._knobs

    def calls(self) -> list[JsonObject]:
        """Every business call so far, oldest first: method, path, key, status, at, fault."""
        with self._lock:
            return [record.to_json() for record in self._calls]

    def reset(self) -> None:
        """Forget every call and effect, and restore the knobs given to the constructor."""
        with self._lock:
            self._calls.clear()
            self._knobs = self._initial_knobs
            self._rng = random.Random(self._knobs.seed)
            self.reset_state()

    # subclass hooks ----------------------------------------------------------------------------

    def handle(self, request: Request) -> Response:
        raise NotImplementedError

    def reset_state(self) -> None:
        """Clear business state; called with the lock held."""

    def call_key(self, request: Request) -> str | None:
        """The idempotency key a call concerns, as recorded in ``calls()``."""
        return request.idempotency_key

    def admin_views(self) -> dict[str, JsonObject]:
        """Extra read models served at ``GET /_admin/<name>``."""
        return {}

    @property
    def lock(self) -> threading.Lock:
        """Held by subclasses around their own state."""
        return self._lock

    # request pipeline --------------------------------------------------------------------------

    def dispatch(self, request: Request) -> Response:
        if request.path == "/_admin" or request.path.startswith("/_admin/"):
            return self._admin(request)
        record = CallRecord(request.method, request.path, self.call_key(request), utc_now())
        with self._lock:
            self._calls.append(record)
            knobs = self._knobs
            draw = self._draw(knobs)
        response, fault = self._respond(request, knobs, draw)
        with self._lock:
            record.status = None if response.drop else response.status
            record.fault = fault
        return response

    def _draw(self, knobs: FaultKnobs) -> _FaultDraw:
        # A draw is made only for a knob that is on, so a run with one knob changes no other draws.
        def hit(rate: float) -> bool:
            return rate > 0 and self._rng.random() < rate

        return _FaultDraw(
            timeout=hit(knobs.timeout_rate),
            fail_5xx=hit(knobs.fail_rate_5xx),
            fail_429=hit(knobs.fail_rate_429),
            fail_after_commit=hit(knobs.fail_after_commit_rate),
        )

    def _respond(self, request: Request, knobs: FaultKnobs, draw: _FaultDraw) -> tuple[Response, str | None]:
        if knobs.latency_ms:
            self._stopping.wait(knobs.latency_ms / 1000)
        if knobs.outage:
            return error_response(
                503, "ServiceUnavailable", f"{self.name} is in an outage (knob outage)"
            ), "outage"
        if draw.timeout:
            self._stopping.wait(knobs.timeout_sleep_s)
            return error_response(
                504, "GatewayTimeout", f"{self.name} timed out; nothing was done"
            ), "timeout"
        if draw.fail_5xx:
            return error_response(503, "ServiceUnavailable", f"{self.name} failed; nothing was done"), "5xx"
        if draw.fail_429:
            throttled = Response(
                status=429,
                body={"error": "TooManyRequests", "message": f"{self.name} is throttling; retry later"},
                headers={"Retry-After": str(knobs.retry_after_s)},
            )
            return throttled, "429"
        response = self.handle(request)
        if request.method == "POST" and draw.fail_after_commit:
            # The effect above is committed; only the reply is lost, which is what the
            # Idempotency-Key protects against when the caller retries.
            if knobs.fail_after_commit_mode == "hang":
                self._stopping.wait(knobs.timeout_sleep_s)
                return Response(status=0, drop=True), "hang_after_commit"
            if knobs.fail_after_commit_mode == "drop":
                return Response(status=0, drop=True), "fail_after_commit"
            return error_response(
                500, "InternalError", f"{self.name} failed while replying"
            ), "fail_after_commit"
        return response, None

    def _admin(self, request: Request) -> Response:
        view = request.path.removeprefix("/_admin").strip("/")
        if request.method == "GET" and view == "calls":
            return json_response(200, {"calls": self.calls()})
        if request.method == "GET" and view == "knobs":
            return json_response(200, self.knobs.to_json())
        if request.method == "POST" and view == "knobs":
            try:
                changes = request.json()
            except ValueError:
                return error_response(400, "InvalidJson", "POST /_admin/knobs takes a JSON object of knobs")
            if not isinstance(changes, dict):
                return error_response(400, "InvalidJson", "POST /_admin/knobs takes a JSON object of knobs")
            try:
                knobs = self.set_knobs(**changes)
            except KnobError as exc:
                return error_response(400, "InvalidKnob", str(exc))
            return json_response(200, knobs.to_json())
        if request.method == "POST" and view == "reset":
            self.reset()
            return json_response(200, {"reset": True})
        if request.method == "GET":
            with self._lock:
                views = self.admin_views()
            if view in views:
                return json_response(200, views[view])
        return error_response(404, "NotFound", f"no admin route {request.method} {request.path}")


class _FakeHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], service: FakeService[Any]
    ) -> None:
        self.service = service
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (its own timeout) closes the socket under us; that is expected.
        if not self.service.quiet:
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server: _FakeHTTPServer
    server_version = "RelayFake/1.0"

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: Any) -> None:
        if not self.server.service.quiet:
            super().log_message(format, *args)

    def _serve(self) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        request = Request(
            method=self.command,
            path=url.path,
            query=parse_qs(url.query),
            headers={name.lower(): value for name, value in self.headers.items()},
            body=body,
        )
        response = self.server.service.dispatch(request)
        if response.drop:
            self.close_connection = True
            return
        payload = b"" if response.body is None else json.dumps(response.body).encode("utf-8")
        try:
            self.send_response(response.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in response.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except OSError:
            # The client already gave up (e.g. its timeout tripped during a timeout fault).
            self.close_connection = True
