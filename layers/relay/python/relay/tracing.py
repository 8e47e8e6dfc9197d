"""Tracing on OpenTelemetry: spans exported as OTLP/JSON to X-Ray's OTLP endpoint, signed with SigV4.

Replaces Powertools Tracer and aws-xray-sdk (maintenance since 2026-02-25, end of support 2027-02-25).
The SDK, its botocore instrumentation and the exporter are imported at the first traced invocation, not
at import: a handler's import costs what it did without tracing (docs/measurements.md).

* On when ``OTEL_SDK_DISABLED`` is not true and a region is known (``AWS_REGION``). The tests and the
  handler tests set ``OTEL_SDK_DISABLED=true``.
* The endpoint resolves as boto3 resolves a service's: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, else
  ``AWS_ENDPOINT_URL_XRAY`` or ``AWS_ENDPOINT_URL`` (the sandbox's emulator) + ``/v1/traces``, else
  ``https://xray.<region>.amazonaws.com/v1/traces``. The endpoint needs CloudWatch Transaction Search
  enabled in the account and ``xray:PutTraceSegments`` (docs/ops.md).
* Spans are kept for the invocation and exported in one request when the handler returns (Lambda
  freezes the environment after that; a background exporter thread would be frozen with it). A failed
  export is logged and dropped: tracing never fails the work it describes.
* Every span carries the ``correlation_id`` of the request or record it belongs to, indexed by X-Ray as
  an annotation (``aws.xray.annotations``), so ``annotation.correlation_id = "..."`` still finds it.
"""

from __future__ import annotations

import contextvars
import gzip
import json
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor

CORRELATION_ID = "correlation_id"
# X-Ray keeps an annotation value of at most 1,000 characters; an API's correlation id is the caller's.
ANNOTATION_MAX_CHARS = 1000
EXPORT_TIMEOUT_SECONDS = 2.0
# The OTLP endpoint takes at most 10,000 spans and 5 MB uncompressed a request (CloudWatch's limits).
EXPORT_MAX_SPANS = 1000

_correlation: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "relay_correlation_id", default=None
)
_lock = threading.Lock()
_state: dict[str, Any] = {}
_TRUE = ("1", "true", "yes", "on")


def enabled() -> bool:
    return os.environ.get("OTEL_SDK_DISABLED", "").lower() not in _TRUE and bool(_region())


def _region() -> str:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or ""


def endpoint() -> str:
    explicit = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if explicit:
        return explicit
    base = os.environ.get("AWS_ENDPOINT_URL_XRAY") or os.environ.get("AWS_ENDPOINT_URL")
    if base:
        return base.rstrip("/") + "/v1/traces"
    return f"https://xray.{_region()}.amazonaws.com/v1/traces"


def tracer() -> Any | None:
    """The process's OpenTelemetry tracer (built at the first call), or None when tracing is off."""
    if not enabled():
        return None
    if "tracer" not in _state:
        with _lock:
            if "tracer" not in _state:
                _state["tracer"] = _build()
    return _state["tracer"]


def _build() -> Any:
    from opentelemetry.instrumentation.botocore import BotocoreInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    service = os.environ.get("POWERTOOLS_SERVICE_NAME", "relay")
    resource = Resource.create(
        {
            "service.name": service,
            "cloud.provider": "aws",
            "cloud.region": _region(),
            "faas.name": os.environ.get("AWS_LAMBDA_FUNCTION_NAME", ""),
        }
    )
    provider = TracerProvider(resource=resource)
    buffer = InvocationBuffer(OtlpJsonExporter(endpoint(), _region()))
    # Duck-typed, not a subclass: SpanProcessor's module would be imported with this one's.
    provider.add_span_processor(cast("SpanProcessor", buffer))
    _state["buffer"] = buffer
    BotocoreInstrumentor().instrument(  # type: ignore[no-untyped-call]
        tracer_provider=provider, skip_dep_check=True
    )
    return provider.get_tracer("relay")


def flush() -> None:
    buffer = _state.get("buffer")
    if buffer is not None:
        buffer.export_now()


def correlation_id() -> str | None:
    return _correlation.get()


@contextmanager
def correlated(value: str | None) -> Iterator[None]:
    """Spans started inside carry ``correlation_id`` = ``value``."""
    token = _correlation.set(value[:ANNOTATION_MAX_CHARS] if value else None)
    try:
        yield
    finally:
        _correlation.reset(token)


def set_correlation_id(value: str | None) -> None:
    """The current span and those started after it (in this context) carry ``value``."""
    if not value:
        return
    value = value[:ANNOTATION_MAX_CHARS]
    _correlation.set(value)
    active = tracer()
    if active is not None:
        from opentelemetry import trace

        _annotate(trace.get_current_span(), value)


def _annotate(span: Any, value: str) -> None:
    span.set_attribute(CORRELATION_ID, value)
    span.set_attribute("aws.xray.annotations", [CORRELATION_ID])


def traceparent() -> str | None:
    """The W3C traceparent of the current span, for the events a step produces; None without tracing."""
    if "tracer" not in _state or _state["tracer"] is None:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags) & 0x01:02x}"


def produced[E](envelope: E, destination: str) -> E:
    """``envelope`` as sent to ``destination``: a PRODUCER span ``publish <eventType>``, child of the span
    that produced the event (its ``traceparent``), and the envelope's traceparent now that span's, so
    its consumers' spans hang under the send (OpenTelemetry's messaging conventions: one "create"-like
    span per message, the batch call beside it). Without tracing, ``envelope`` itself."""
    active = tracer()
    if active is None:
        return envelope
    from opentelemetry.trace import SpanKind

    env: Any = envelope
    with (
        correlated(getattr(env, "correlation_id", None)),
        active.start_as_current_span(
            f"publish {env.event_type}",
            context=remote_context(env.traceparent),
            kind=SpanKind.PRODUCER,
            attributes={"messaging.destination.name": destination, "relay.eventId": env.event_id},
        ),
    ):
        current = traceparent()
    return cast("E", env.model_copy(update={"traceparent": current})) if current else envelope


def remote_context(value: str | None) -> Any | None:
    """An OpenTelemetry context whose parent is the ``traceparent`` ``value`` (None if invalid)."""
    if not value:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    context = TraceContextTextMapPropagator().extract({"traceparent": value})
    from opentelemetry import trace

    return context if trace.get_current_span(context).get_span_context().is_valid else None


class InvocationBuffer:
    """A span processor that keeps ended spans and exports them when asked (at the end of an
    invocation), or when ``EXPORT_MAX_SPANS`` accumulate. Sets each span's correlation id at start."""

    def __init__(self, exporter: OtlpJsonExporter) -> None:
        self.exporter = exporter
        self.spans: list[Any] = []
        self._lock = threading.Lock()

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        value = _correlation.get()
        if value:
            _annotate(span, value)

    def on_end(self, span: Any) -> None:
        with self._lock:
            self.spans.append(span)
            full = len(self.spans) >= EXPORT_MAX_SPANS
        if full:
            self.export_now()

    def export_now(self) -> None:
        with self._lock:
            spans, self.spans = self.spans, []
        if spans:
            self.exporter.export(spans)

    def shutdown(self) -> None:
        self.export_now()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self.export_now()
        return True

    def _on_ending(self, span: Any) -> None:  # SDK >= 1.35 calls it; nothing to do
        return


class OtlpJsonExporter:
    """OTLP/HTTP JSON (gzip), SigV4-signed for the ``xray`` service with the function's credentials."""

    def __init__(self, url: str, region: str) -> None:
        self.url = url
        self.region = region
        self.failures = 0

    def export(self, spans: Sequence[Any]) -> bool:
        import urllib.request

        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.session import get_session

        body = gzip.compress(json.dumps(encode(spans), separators=(",", ":")).encode())
        headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
        try:
            credentials = get_session().get_credentials()
            request = AWSRequest(method="POST", url=self.url, data=body, headers=headers)
            if credentials is not None:
                SigV4Auth(credentials.get_frozen_credentials(), "xray", self.region).add_auth(request)
            signed = urllib.request.Request(  # noqa: S310 - the OTLP endpoint's https (or the sandbox's) URL
                self.url, data=body, headers=dict(request.headers.items()), method="POST"
            )
            with urllib.request.urlopen(signed, timeout=EXPORT_TIMEOUT_SECONDS) as answer:  # noqa: S310
                answer.read()
            return True
        except Exception as exc:
            self.failures += 1
            if self.failures == 1 or self.failures % 100 == 0:
                # The stdlib logger, not relay.observability's (which imports this module): Lambda keeps
                # stderr in the function's log group all the same.
                logging.getLogger(__name__).warning(
                    "could not export %d spans to %s (dropped; the work goes on; %d failures): %s",
                    len(spans),
                    self.url,
                    self.failures,
                    str(exc)[:300],
                )
            return False


_KINDS = {"INTERNAL": 1, "SERVER": 2, "CLIENT": 3, "PRODUCER": 4, "CONSUMER": 5}


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": str(value)}


def _attributes(attributes: Any) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in dict(attributes or {}).items()]


def encode(spans: Sequence[Any]) -> dict[str, Any]:
    """OTLP/JSON ``ExportTraceServiceRequest`` of SDK ``ReadableSpan``s (ids in hex, as OTLP/JSON says)."""
    by_resource: dict[int, tuple[Any, list[dict[str, Any]]]] = {}
    for span in spans:
        context = span.get_span_context()
        entry: dict[str, Any] = {
            "traceId": f"{context.trace_id:032x}",
            "spanId": f"{context.span_id:016x}",
            "name": span.name,
            "kind": _KINDS.get(span.kind.name, 1),
            "startTimeUnixNano": str(span.start_time or 0),
            "endTimeUnixNano": str(span.end_time or span.start_time or 0),
            "attributes": _attributes(span.attributes),
            "status": {"code": {"UNSET": 0, "OK": 1, "ERROR": 2}[span.status.status_code.name]},
        }
        if span.parent is not None:
            entry["parentSpanId"] = f"{span.parent.span_id:016x}"
        if span.status.description:
            entry["status"]["message"] = span.status.description
        if span.events:
            entry["events"] = [
                {"name": e.name, "timeUnixNano": str(e.timestamp), "attributes": _attributes(e.attributes)}
                for e in span.events
            ]
        if span.links:
            entry["links"] = [
                {
                    "traceId": f"{link.context.trace_id:032x}",
                    "spanId": f"{link.context.span_id:016x}",
                    "attributes": _attributes(link.attributes),
                }
                for link in span.links
            ]
        resource = span.resource
        by_resource.setdefault(id(resource), (resource, []))[1].append(entry)
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes(resource.attributes)},
                "scopeSpans": [{"scope": {"name": "relay"}, "spans": entries}],
            }
            for resource, entries in by_resource.values()
        ]
    }
