"""AWS API faults, injected inside the emulator: a function's own calls to DynamoDB, SQS, SNS and S3
sometimes fail the way AWS's sometimes do, so the kernel's retries, idempotency and redrive are
exercised by the sandbox and not only by the unit tests' fakes.

The fault model:

* **Who**: only the calls a function's own code makes, signed with its access key
  (``emulator.iam.access_key_for``) and without the glue's ``relay-glue/…`` User-Agent: an event source
  mapping's polls are Lambda's side of AWS, which retries them itself. The sandbox's own calls
  (provisioning, the demo driver, ops: any other key) and the control routes (``/_relay/…``,
  ``/moto-api/…``) are never faulted. ``callers`` narrows it to functions whose name contains one of
  the given substrings.
* **How often**: each matching call gets a fault with probability ``rate``; the kind is then drawn
  uniformly from the enabled ``kinds``. Every draw comes from one ``random.Random(seed)`` under a lock,
  so a seed replays the same sequence of faults for the same sequence of calls.
* **What**, phase ``before`` (the request never reaches moto: nothing is applied):
  ``throttle`` (the service's throttling error: DynamoDB ``ProvisionedThroughputExceededException``
  400, SQS ``RequestThrottled`` 400, SNS ``Throttling`` 400, S3 ``SlowDown`` 503), ``5xx`` (a 500:
  DynamoDB ``InternalServerError``, SQS ``InternalFailure``, SNS and S3 ``InternalError``) and
  ``timeout`` (no reply: the connection is dropped, so the client sees a connection error at once
  instead of waiting out its ``read_timeout``; botocore retries both the same way).
* **What**, phase ``after`` (moto serves the request, so its effect IS applied, then the reply is
  lost): ``5xx-after`` (the 500 above instead of the real answer) and ``timeout-after`` (the connection
  dropped instead of the real answer). Whatever moto answered is lost, its own errors included. These
  are the faults that make a retry apply a write twice: a second item version, a duplicate message.

Every error is one botocore's standard retry mode retries (``botocore/retries/standard.py``): the
throttling codes are in its ``_THROTTLED_ERROR_CODES``, 500 and 503 in its transient status codes,
and a dropped connection raises ``ConnectionClosedError``, an ``HTTPClientError``. Each is written in
the service's protocol so botocore parses the same code it would from AWS: JSON 1.0 with ``__type``
for DynamoDB and SQS (SQS also sends ``x-amzn-query-error``, from which botocore takes the code of a
query-compatible service), query XML ``<ErrorResponse>`` for SNS, S3's REST XML ``<Error>``.

Installed outermost in the emulator process, a ``before`` fault is answered ahead of IAM enforcement
and the request meter (AWS bills no throttled request); an ``after`` fault is metered as served.

Off (rate 0) at start. ``POST /_relay/faults`` sets the configuration
(``{"rate": 0.1, "seed": 7, "services": [...], "kinds": [...], "callers": [...]}``; all but ``rate``
optional, defaults: the four services, all five kinds, every function), ``GET`` answers it with the
faults injected per (caller, service, action, kind), ``DELETE`` turns them off and clears the counts.
``configure``, ``injected`` and ``clear`` are the client, for the sandbox and tests.
"""

from __future__ import annotations

import http
import json
import random
import socket
import sys
import threading
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from emulator import iam_enforcer
from emulator.request_meter import _action
from emulator.server import GLUE_AGENT

PATH = "/_relay/faults"
_UNFAULTED_PREFIXES = ("/_relay/", "/moto-api/")

PHASES = {
    "throttle": "before",
    "5xx": "before",
    "timeout": "before",
    "5xx-after": "after",
    "timeout-after": "after",
}
KINDS = tuple(PHASES)
SERVICES = ("dynamodb", "sqs", "sns", "s3")

# service -> fault -> (HTTP status, error code, message, query fault type)
_ERRORS: dict[str, dict[str, tuple[int, str, str, str]]] = {
    "dynamodb": {
        "throttle": (
            400,
            "ProvisionedThroughputExceededException",
            "The level of configured provisioned throughput for the table was exceeded. "
            "Consider increasing your provisioning level with the UpdateTable API.",
            "Sender",
        ),
        "5xx": (500, "InternalServerError", "Internal server error", "Receiver"),
    },
    "sqs": {
        "throttle": (400, "RequestThrottled", "Request is throttled.", "Sender"),
        "5xx": (500, "InternalFailure", "We encountered an internal error. Please try again.", "Receiver"),
    },
    "sns": {
        "throttle": (400, "Throttling", "Rate exceeded", "Sender"),
        "5xx": (500, "InternalError", "Internal Error", "Receiver"),
    },
    "s3": {
        "throttle": (503, "SlowDown", "Please reduce your request rate.", "Sender"),
        "5xx": (500, "InternalError", "We encountered an internal error. Please try again.", "Receiver"),
    },
}
# The ``__type`` namespace AWS puts in a JSON 1.0 error (botocore keeps what follows the ``#``).
_JSON_NAMESPACES = {"dynamodb": "com.amazonaws.dynamodb.v20120810", "sqs": "com.amazonaws.sqs"}
_QUERY_COMPATIBLE = frozenset({"sqs"})  # JSON services that also name the query-protocol code


class FaultConfigError(ValueError):
    """A fault configuration the injector refuses (the message says which field and why)."""


@dataclass(frozen=True)
class FaultConfig:
    rate: float = 0.0
    seed: int | None = None
    services: tuple[str, ...] = SERVICES
    kinds: tuple[str, ...] = KINDS
    callers: tuple[str, ...] = ()  # substrings of function names; empty: every function

    def to_json(self) -> dict[str, Any]:
        return {
            "rate": self.rate,
            "seed": self.seed,
            "services": list(self.services),
            "kinds": list(self.kinds),
            "callers": list(self.callers),
        }


def _names(value: Any, field: str, known: Sequence[str] | None) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise FaultConfigError(f"{field} must be a list of strings, got {value!r}")
    if known is not None:
        if not value:
            raise FaultConfigError(f"{field} must name at least one of {', '.join(known)}")
        unknown = [v for v in value if v not in known]
        if unknown:
            raise FaultConfigError(
                f"{field}: unknown {', '.join(map(repr, unknown))}; known: {', '.join(known)}"
            )
    return tuple(dict.fromkeys(value))


def parse_config(body: Any) -> FaultConfig:
    """The configuration a ``POST /_relay/faults`` asks for; fields left out take their defaults."""
    if not isinstance(body, dict):
        raise FaultConfigError(f"the body must be a JSON object, got {type(body).__name__}")
    fields = {"rate", "seed", "services", "kinds", "callers"}
    extra = sorted(set(body) - fields)
    if extra:
        raise FaultConfigError(f"unknown field(s) {', '.join(extra)}; known: {', '.join(sorted(fields))}")
    rate = body.get("rate")
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 1:
        raise FaultConfigError(f"rate must be a number from 0 to 1 (the chance of a fault), got {rate!r}")
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise FaultConfigError(f"seed must be an integer or null, got {seed!r}")
    return FaultConfig(
        rate=float(rate),
        seed=seed,
        services=_names(body.get("services", list(SERVICES)), "services", SERVICES),
        kinds=_names(body.get("kinds", list(KINDS)), "kinds", KINDS),
        callers=_names(body.get("callers", []), "callers", None),
    )


_lock = threading.Lock()
_config = FaultConfig()
_random = random.Random()
# (caller, service, action, kind) -> faults injected
_counts: Counter[tuple[str, str, str, str]] = Counter()


def set_config(config: FaultConfig) -> None:
    """Replace the configuration and restart the draws from its seed (the counts carry on)."""
    global _config, _random
    with _lock:
        _config = config
        _random = random.Random(config.seed)
    print(f"AWS faults: {json.dumps(config.to_json())}", file=sys.stderr)


def reset() -> None:
    """Faults off, counts cleared."""
    global _config
    with _lock:
        _config = FaultConfig()
        _counts.clear()


def snapshot() -> dict[str, Any]:
    with _lock:
        return {
            "config": _config.to_json(),
            "injected": [
                {"caller": c, "service": s, "action": a, "kind": k, "phase": PHASES[k], "n": n}
                for (c, s, a, k), n in sorted(_counts.items())
            ],
        }


def _draw(config: FaultConfig) -> str | None:
    with _lock:
        if _random.random() >= config.rate:
            return None
        return _random.choice(config.kinds)


def _record(caller: str, service: str, action: str, kind: str) -> None:
    with _lock:
        _counts[(caller, service, action, kind)] += 1


# -- the replies -----------------------------------------------------------------------------------------


def error_response(service: str, fault: str, environ: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    """The error reply of ``fault`` (``throttle`` or ``5xx``) in the protocol of the request."""
    status, code, message, fault_type = _ERRORS[service][fault]
    request_id = str(uuid.uuid4())
    if environ.get("HTTP_X_AMZ_TARGET"):
        headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": request_id}
        namespace = _JSON_NAMESPACES.get(service)
        if service in _QUERY_COMPATIBLE:
            headers["x-amzn-query-error"] = f"{code};{fault_type}"
        body = {"__type": f"{namespace}#{code}" if namespace else code, "message": message}
        return status, headers, json.dumps(body).encode()
    if service == "s3":
        headers = {
            "Content-Type": "application/xml",
            "x-amz-request-id": request_id,
            "x-amz-id-2": request_id,
        }
        if environ.get("REQUEST_METHOD") == "HEAD":  # S3 answers a HEAD without a body
            return status, headers, b""
        s3_body = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}'
            f"</Message><RequestId>{request_id}</RequestId><HostId>{request_id}</HostId></Error>"
        )
        return status, headers, s3_body.encode()
    query_body = (
        f'<ErrorResponse xmlns="https://{service}.amazonaws.com/doc/"><Error><Type>{fault_type}</Type>'
        f"<Code>{code}</Code><Message>{message}</Message></Error><RequestId>{request_id}</RequestId>"
        "</ErrorResponse>"
    )
    return status, {"Content-Type": "text/xml", "x-amzn-RequestId": request_id}, query_body.encode()


def _respond(start_response: Any, status: int, headers: dict[str, str], body: bytes) -> list[bytes]:
    start_response(
        f"{status} {http.HTTPStatus(status).phrase}", [*headers.items(), ("Content-Length", str(len(body)))]
    )
    return [body]


class ConnectionDropped(ConnectionAbortedError):
    """Raised to the WSGI server after the injector shut the client's connection: werkzeug counts a
    ``ConnectionError`` out of the application as the client going away and carries on quietly."""


def _drop(environ: dict[str, Any]) -> None:
    sock = environ.get("werkzeug.socket")
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:  # the client went first
            pass
    raise ConnectionDropped("AWS fault: connection dropped without a reply")


def _drain(environ: dict[str, Any]) -> None:
    """Read the request body the service never looks at, so the client has sent all of it before
    the connection goes (a drop mid-upload would be a different fault: a reset while sending)."""
    stream = environ.get("wsgi.input")
    length = int(environ.get("CONTENT_LENGTH") or 0)
    while stream is not None and length > 0:
        chunk = stream.read(min(length, 1 << 20))
        if not chunk:
            break
        length -= len(chunk)


def _served_then_lost(
    original: Callable[..., Any],
    app: Any,
    environ: dict[str, Any],
    service: str,
    kind: str,
    start_response: Any,
) -> Any:
    def hold(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
        return lambda data: None

    answer: Iterable[bytes] = original(app, environ, hold)
    try:
        for _ in answer:  # the whole answer: whatever moto does while streaming it has happened
            pass
    finally:
        close = getattr(answer, "close", None)
        if close is not None:
            close()
    if kind == "timeout-after":
        _drop(environ)
    return _respond(start_response, *error_response(service, "5xx", environ))


# -- the middleware --------------------------------------------------------------------------------------


def _control(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    method = environ.get("REQUEST_METHOD", "GET")
    headers = {"Content-Type": "application/json"}
    if method == "POST":
        stream = environ["wsgi.input"]
        raw = stream.read(int(environ.get("CONTENT_LENGTH") or 0))
        try:
            config = parse_config(json.loads(raw or b"null"))
        except ValueError as exc:  # FaultConfigError, or a body that is not JSON
            message = f"{PATH}: {exc}; nothing changed"
            return _respond(start_response, 400, headers, json.dumps({"message": message}).encode())
        set_config(config)
        return _respond(start_response, 200, headers, json.dumps(config.to_json()).encode())
    if method == "DELETE":
        reset()
    elif method != "GET":
        message = f"{PATH} takes GET (the counts), POST (a configuration) or DELETE (off), not {method}"
        return _respond(start_response, 405, headers, json.dumps({"message": message}).encode())
    return _respond(start_response, 200, headers, json.dumps(snapshot()).encode())


def _faulty(original: Callable[..., Any]) -> Callable[..., Any]:
    def __call__(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
        path = str(environ.get("PATH_INFO", ""))
        if path == PATH:
            return _control(environ, start_response)
        config = _config
        if config.rate <= 0 or path.startswith(_UNFAULTED_PREFIXES):
            return original(self, environ, start_response)
        credential = iam_enforcer._credential(environ)
        if credential is None:
            return original(self, environ, start_response)
        access_key, region, service = credential
        if str(environ.get("HTTP_X_AMZ_TARGET", "")).startswith("DynamoDBStreams_"):
            service = "dynamodbstreams"  # streams sign as dynamodb; they are the glue's reads anyway
        fn = iam_enforcer.STATE.functions.get(access_key)
        if (
            fn is None
            or service not in config.services
            or GLUE_AGENT + "/" in str(environ.get("HTTP_USER_AGENT", ""))
        ):
            return original(self, environ, start_response)
        caller = str(fn.principal.caller.name)
        if config.callers and not any(part in caller for part in config.callers):
            return original(self, environ, start_response)
        kind = _draw(config)
        if kind is None:
            return original(self, environ, start_response)
        request = iam_enforcer._request(environ, service, region, iam_enforcer.STATE.account)
        _record(caller, service, _action(environ, service, request.body), kind)
        if PHASES[kind] == "after":
            return _served_then_lost(original, self, environ, service, kind, start_response)
        _drain(environ)
        if kind == "timeout":
            _drop(environ)
        return _respond(start_response, *error_response(service, kind, environ))

    __call__.__wrapped__ = original  # type: ignore[attr-defined]
    return __call__


def install() -> Callable[[], None]:
    """Inject AWS faults in this moto server process (install last, outermost: after
    ``request_meter.install``); off until configured. Returns a function that removes it."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    original = DomainDispatcherApplication.__call__
    DomainDispatcherApplication.__call__ = _faulty(original)  # type: ignore[method-assign]

    def remove() -> None:
        DomainDispatcherApplication.__call__ = original  # type: ignore[method-assign]
        reset()

    return remove


# -- the client ------------------------------------------------------------------------------------------


def _call(endpoint: str, method: str, body: dict[str, Any] | None = None, timeout: float = 10.0) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        endpoint.rstrip("/") + PATH, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 400:
            raise FaultConfigError(json.loads(exc.read()).get("message", str(exc))) from None
        raise


def configure(
    endpoint: str,
    *,
    rate: float,
    seed: int | None = None,
    services: Sequence[str] | None = None,
    kinds: Sequence[str] | None = None,
    callers: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Set the emulator's faults (``rate`` 0 turns them off); answers the configuration in force.
    Raises ``FaultConfigError`` with the emulator's reason for a configuration it refuses."""
    body: dict[str, Any] = {"rate": rate, "seed": seed}
    for name, value in (("services", services), ("kinds", kinds), ("callers", callers)):
        if value is not None:
            body[name] = list(value)
    return dict(_call(endpoint, "POST", body))


def injected(endpoint: str) -> list[dict[str, Any]]:
    """The faults injected so far: one entry per (caller, service, action, kind) with its phase and n."""
    return list(_call(endpoint, "GET")["injected"])


def clear(endpoint: str) -> None:
    """Faults off and their counts cleared."""
    _call(endpoint, "DELETE")
