"""The sandbox's trace collector: X-Ray's OTLP endpoint (``POST /v1/traces``) inside the emulator process.

The functions export their spans as on AWS (``relay.tracing``: OTLP/JSON, gzip, SigV4 for ``xray``); their
``AWS_ENDPOINT_URL`` points at the emulator, so the same request lands here. Spans are kept in memory per
trace id (the newest ``MAX_TRACES`` traces), and read back without changing anything:

    GET /_relay/traces?correlationId=<id>   the traces with a span of that correlation id
    GET /_relay/traces?operationId=<id>     ... of that operation (a span's ``relay.operationId``, or the
                                            traces of the correlation ids an operation's spans carry)
    GET /_relay/traces?traceId=<32 hex>     that trace
    -> 200 {"traces": [{"traceId", "spans": [{traceId, spanId, parentSpanId, name, kind, service,
             start, end, durationMs, status, correlationId, attributes, events, links}]}]}

``operation_trace(endpoint, ...)`` is the client (the console's trace view calls it).

As on AWS, an export is authorized as ``xray:PutTraceSegments`` against the signing function's role
(``emulator.iam_requests``: the enforcer wraps this collector), an unsigned one is refused, and the
endpoint's documented limits hold (CloudWatch "OTLP Endpoints": 5 MB uncompressed and 10,000 spans a
request, 200 KB a span); AWS does not document the error code of a breach, so the sandbox answers 400
``ValidationException`` naming the limit. The meter bills the uncompressed bytes as span ingestion
(``emulator.request_meter``). Differences from AWS, named: OTLP/protobuf is answered 415 (the functions
send JSON).
"""

from __future__ import annotations

import json
import threading
import urllib.parse
import urllib.request
import zlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from emulator import iam_enforcer
from emulator.sqs_admin import json_response

OTLP_PATH = "/v1/traces"
READ_PATH = "/_relay/traces"
MAX_TRACES = 5000
MAX_REQUEST_BYTES = 5 * 1024 * 1024
MAX_REQUEST_SPANS = 10_000
MAX_SPAN_BYTES = 200 * 1024
ACCEPTED = "relay.traces.accepted"  # the WSGI environ key of an accepted export's (bytes, spans)
_KIND_NAMES = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


def _plain(value: dict[str, Any]) -> Any:
    for kind, raw in value.items():
        if kind == "arrayValue":
            return [_plain(v) for v in raw.get("values", [])]
        if kind == "intValue":
            return int(raw)
        return raw
    return None


def _attributes(entries: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {e["key"]: _plain(e.get("value") or {}) for e in entries or []}


class TraceStore:
    def __init__(self, max_traces: int = MAX_TRACES) -> None:
        self.max_traces = max_traces
        self.traces: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, request: dict[str, Any]) -> int:
        """Store an OTLP/JSON ``ExportTraceServiceRequest``; returns the number of spans taken."""
        spans = []
        for resource_spans in request.get("resourceSpans") or []:
            resource = _attributes((resource_spans.get("resource") or {}).get("attributes"))
            for scope in resource_spans.get("scopeSpans") or []:
                for raw in scope.get("spans") or []:
                    spans.append(_span(raw, resource))
        with self._lock:
            for span in spans:
                self.traces.setdefault(span["traceId"], []).append(span)
                self.traces.move_to_end(span["traceId"])
            while len(self.traces) > self.max_traces:
                self.traces.popitem(last=False)
        return len(spans)

    def find(
        self,
        *,
        trace_id: str | None = None,
        correlation_id: str | None = None,
        operation_id: str | None = None,
    ) -> list[dict[str, Any]]:
        with self._lock:
            traces = {k: list(v) for k, v in self.traces.items()}
        if trace_id:
            chosen = {trace_id} & set(traces)
        else:
            correlation_ids = {correlation_id} if correlation_id else set()
            chosen = set()
            for key, spans in traces.items():
                for span in spans:
                    if operation_id and span["attributes"].get("relay.operationId") == operation_id:
                        chosen.add(key)
                        if span["correlationId"]:
                            correlation_ids.add(span["correlationId"])
            for key, spans in traces.items():
                if any(s["correlationId"] in correlation_ids for s in spans if s["correlationId"]):
                    chosen.add(key)
        result = []
        for key in chosen:
            spans = sorted(traces[key], key=lambda s: s["start"])
            result.append({"traceId": key, "start": spans[0]["start"], "spans": spans})
        return sorted(result, key=lambda t: t["start"])


def _span(raw: dict[str, Any], resource: dict[str, Any]) -> dict[str, Any]:
    attributes = _attributes(raw.get("attributes"))
    start, end = int(raw.get("startTimeUnixNano") or 0), int(raw.get("endTimeUnixNano") or 0)
    return {
        "traceId": str(raw.get("traceId", "")).lower(),
        "spanId": str(raw.get("spanId", "")).lower(),
        "parentSpanId": str(raw.get("parentSpanId") or "").lower() or None,
        "name": raw.get("name", ""),
        "kind": _KIND_NAMES.get(int(raw.get("kind") or 0), "UNSPECIFIED"),
        "service": resource.get("service.name"),
        "function": resource.get("faas.name"),
        "start": start,
        "end": end,
        "durationMs": round((end - start) / 1e6, 3),
        "status": {0: "UNSET", 1: "OK", 2: "ERROR"}.get(int((raw.get("status") or {}).get("code") or 0)),
        "correlationId": attributes.get("correlation_id"),
        "attributes": attributes,
        "events": [
            {
                "name": e.get("name"),
                "time": int(e.get("timeUnixNano") or 0),
                "attributes": _attributes(e.get("attributes")),
            }
            for e in raw.get("events") or []
        ],
        "links": [
            {"traceId": link.get("traceId"), "spanId": link.get("spanId")} for link in raw.get("links") or []
        ],
    }


STORE = TraceStore()


def _refused(start_response: Any, status: str, error_type: str, message: str) -> list[bytes]:
    """An error as the REST-JSON endpoint answers it: its type in ``x-amzn-ErrorType``."""
    return json_response(start_response, status, {"Message": message}, (("x-amzn-ErrorType", error_type),))


def uncompressed(body: bytes) -> bytes:
    """A gzip body inflated, at most one byte past the request limit (so a bomb stops there)."""
    inflate = zlib.decompressobj(wbits=31)
    data = inflate.decompress(body, MAX_REQUEST_BYTES + 1)
    if not inflate.eof and len(data) <= MAX_REQUEST_BYTES:
        raise EOFError("the gzip stream ends early")
    return data


def over_limit(body: bytes, request: dict[str, Any]) -> str | None:
    """Which of the endpoint's limits an uncompressed OTLP/JSON ``body`` breaks, or None."""
    if len(body) > MAX_REQUEST_BYTES:
        return f"the request is over {MAX_REQUEST_BYTES} bytes uncompressed (the endpoint's limit)"
    spans = [
        raw
        for resource_spans in request.get("resourceSpans") or []
        for scope in resource_spans.get("scopeSpans") or []
        for raw in scope.get("spans") or []
    ]
    if len(spans) > MAX_REQUEST_SPANS:
        return f"the request has {len(spans)} spans; the limit is {MAX_REQUEST_SPANS}"
    for raw in spans:
        size = len(json.dumps(raw, separators=(",", ":")))
        if size > MAX_SPAN_BYTES:
            return f"span {raw.get('name', '?')!r} is {size} bytes; the limit is {MAX_SPAN_BYTES}"
    return None


def _handle(original: Callable[..., Any]) -> Callable[..., Any]:
    def __call__(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "GET")
        if path == OTLP_PATH and method == "POST":
            if iam_enforcer._credential(environ) is None:
                return _refused(
                    start_response,
                    "403 Forbidden",
                    "MissingAuthenticationTokenException",
                    "Missing Authentication Token (the OTLP endpoint takes SigV4-signed requests)",
                )
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = environ["wsgi.input"].read(length) if length else b""
            if "gzip" in (environ.get("HTTP_CONTENT_ENCODING") or ""):
                try:
                    body = uncompressed(body)
                except (OSError, EOFError, zlib.error) as exc:
                    return _refused(
                        start_response, "400 Bad Request", "ValidationException", f"not gzip: {exc}"
                    )
            if "json" not in (environ.get("CONTENT_TYPE") or ""):
                return json_response(
                    start_response,
                    "415 Unsupported Media Type",
                    {"message": "the sandbox takes OTLP/JSON only"},
                )
            try:
                request = json.loads(body or b"{}")
                breach = over_limit(body, request)
                if breach:
                    return _refused(start_response, "400 Bad Request", "ValidationException", breach)
                # What the meter bills (emulator.request_meter, outside): read here, not parsed twice.
                environ[ACCEPTED] = (len(body), STORE.add(request))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                return _refused(
                    start_response, "400 Bad Request", "ValidationException", f"not OTLP/JSON: {exc}"
                )
            return json_response(start_response, "200 OK", {"partialSuccess": {}})
        if path == READ_PATH:
            query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
            one = {k: v[0] for k, v in query.items() if v}
            traces = STORE.find(
                trace_id=one.get("traceId"),
                correlation_id=one.get("correlationId"),
                operation_id=one.get("operationId"),
            )
            return json_response(start_response, "200 OK", {"traces": traces})
        return original(self, environ, start_response)

    __call__.__wrapped__ = original  # type: ignore[attr-defined]
    return __call__


def install() -> Callable[[], None]:
    """Serve ``/v1/traces`` and ``/_relay/traces`` in this moto server process; returns the remover."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    original = DomainDispatcherApplication.__call__
    DomainDispatcherApplication.__call__ = _handle(original)  # type: ignore[method-assign]

    def remove() -> None:
        DomainDispatcherApplication.__call__ = original  # type: ignore[method-assign]

    return remove


def operation_trace(
    endpoint: str,
    *,
    operation_id: str | None = None,
    correlation_id: str | None = None,
    trace_id: str | None = None,
    urlopen: Callable[..., Any] = urllib.request.urlopen,
    timeout: float = 10.0,
) -> list[dict[str, Any]]:
    """The traces the sandbox at ``endpoint`` collected for an operation (or a correlation id, or one
    trace id), oldest first, each ``{"traceId", "start", "spans": [...]}`` with its spans by start time."""
    query = {
        k: v
        for k, v in (("operationId", operation_id), ("correlationId", correlation_id), ("traceId", trace_id))
        if v
    }
    if not query:
        raise ValueError("operation_trace needs operation_id, correlation_id or trace_id")
    url = f"{endpoint.rstrip('/')}{READ_PATH}?{urllib.parse.urlencode(query)}"
    with urlopen(url, timeout=timeout) as response:
        return list(json.loads(response.read())["traces"])
