"""The sandbox's trace collector (emulator.traces): the functions' exporter (relay.tracing) posts OTLP/JSON,
gzip, SigV4-signed for ``xray``, to ``/v1/traces``; ``operation_trace`` reads an operation's trace back by
its operation id (through the correlation id its spans share) or a correlation id."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from emulator import traces
from relay import tracing


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture(autouse=True)
def sdk_on(monkeypatch: pytest.MonkeyPatch) -> None:
    # The suite sets OTEL_SDK_DISABLED (tests/conftest.py), which makes the SDK's tracers no-ops.
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)


@pytest.fixture
def collector() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []
    store = traces.TraceStore()
    handle = traces._handle(lambda _self, environ, start_response: [])

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        seen.append({k: v for k, v in environ.items() if k.startswith("HTTP_")})
        return handle(None, environ, start_response)

    original, traces.STORE = traces.STORE, store
    server = make_server("127.0.0.1", 0, app, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", seen
    finally:
        server.shutdown()
        traces.STORE = original


def test_an_operations_spans_are_exported_signed_and_read_back_as_one_trace(
    collector: tuple[str, list[dict[str, Any]]],
) -> None:
    endpoint, seen = collector
    buffer = tracing.InvocationBuffer(tracing.OtlpJsonExporter(endpoint + traces.OTLP_PATH, "us-east-1"))
    provider = TracerProvider(resource=Resource.create({"service.name": "payments"}))
    provider.add_span_processor(buffer)
    tracer = provider.get_tracer("test")

    with tracing.correlated("corr-42"), tracer.start_as_current_span("## handler api"):
        with tracer.start_as_current_span("## record", attributes={"relay.operationId": "op-1"}):
            pass
    with tracing.correlated("corr-other"), tracer.start_as_current_span("## handler other"):
        pass
    buffer.export_now()

    assert seen and seen[-1]["HTTP_AUTHORIZATION"].startswith("AWS4-HMAC-SHA256 Credential=testing/")
    assert "/us-east-1/xray/aws4_request" in seen[-1]["HTTP_AUTHORIZATION"]
    assert seen[-1]["HTTP_CONTENT_ENCODING"] == "gzip"

    (trace,) = traces.operation_trace(endpoint, operation_id="op-1")
    assert [s["name"] for s in trace["spans"]] == ["## handler api", "## record"]
    assert {s["correlationId"] for s in trace["spans"]} == {"corr-42"}
    handler, record = trace["spans"]
    assert record["parentSpanId"] == handler["spanId"] and handler["service"] == "payments"
    assert traces.operation_trace(endpoint, correlation_id="corr-other")[0]["spans"][0]["name"] == (
        "## handler other"
    )
    assert traces.operation_trace(endpoint, operation_id="op-unknown") == []


def test_a_failed_export_is_dropped_without_failing_the_work() -> None:
    exporter = tracing.OtlpJsonExporter("http://127.0.0.1:9/v1/traces", "us-east-1")
    provider = TracerProvider()
    buffer = tracing.InvocationBuffer(exporter)
    provider.add_span_processor(buffer)
    with provider.get_tracer("t").start_as_current_span("x"):
        pass
    buffer.export_now()
    assert exporter.failures == 1
