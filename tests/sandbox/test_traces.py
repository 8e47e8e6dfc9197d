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


# -- the collector behind the emulator's IAM enforcer and meter, as the emulator installs them ---------


@pytest.fixture
def emulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    from emulator import iam_enforcer, request_meter
    from tests.sandbox.moto_server import moto_server

    original, traces.STORE = traces.STORE, traces.TraceStore()
    try:
        # emulator.server's order: the collector inside the IAM enforcer, the meter outside both.
        with moto_server(traces.install, iam_enforcer.install, request_meter.install) as url:
            yield url
    finally:
        traces.STORE = original


def _model(endpoint: str, statements: list[dict[str, Any]]) -> None:
    from tests.sandbox.test_iam import _put_model  # the function "worker", access key ASIAWORKER

    _put_model(endpoint, statements, {})


def _export(
    endpoint: str, body: bytes, *, key: str | None = "ASIAWORKER", compress: bool = True
) -> tuple[int, Any]:
    import gzip
    import json
    import urllib.error
    import urllib.request

    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    data = gzip.compress(body) if compress else body  # not compressed: sent as gzip all the same
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    request = AWSRequest(method="POST", url=endpoint + traces.OTLP_PATH, data=data, headers=headers)
    if key:
        SigV4Auth(Credentials(key, "testing"), "xray", "us-east-1").add_auth(request)
    sent = urllib.request.Request(
        request.url, data=data, headers=dict(request.headers.items()), method="POST"
    )
    try:
        with urllib.request.urlopen(sent) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, {"type": error.headers.get("x-amzn-ErrorType"), **json.loads(error.read())}


def _spans(*names: str, attribute: str = "") -> bytes:
    import json

    spans = [
        {
            "traceId": "0af7651916cd43dd8448eb211c80319c",
            "spanId": f"{i + 1:016x}",
            "name": name,
            "kind": 2,
            "startTimeUnixNano": "1",
            "endTimeUnixNano": "2",
            "attributes": [{"key": "correlation_id", "value": {"stringValue": "corr-iam" + attribute}}],
        }
        for i, name in enumerate(names)
    ]
    return json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": spans}]}]}).encode()


def test_an_export_is_authorized_as_put_trace_segments_and_metered_by_its_bytes(emulator: str) -> None:
    import json
    import urllib.request

    body = _spans("## handler a", "## record")
    _model(emulator, [{"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": "*"}])
    status, answer = _export(emulator, body)
    assert (status, answer["type"]) == (403, "AccessDeniedException")
    assert "is not authorized to perform: xray:PutTraceSegments on resource: *" in answer["Message"]
    assert traces.STORE.find(correlation_id="corr-iam") == []  # nothing denied was kept

    # What Tracing.ACTIVE grants every function (infra/constructs/function.py).
    _model(emulator, [{"Effect": "Allow", "Action": ["xray:PutTraceSegments"], "Resource": "*"}])
    assert _export(emulator, body) == (200, {"partialSuccess": {}})
    assert [s["name"] for s in traces.STORE.find(correlation_id="corr-iam")[0]["spans"]] == [
        "## handler a",
        "## record",
    ]
    meter = json.loads(urllib.request.urlopen(emulator + "/_relay/iam/meter").read())
    (row,) = [r for r in meter if r["service"] == "xray"]
    assert row["caller"] == "worker"
    assert (row["action"], row["entries"]) == ("OTLP spans", 2)
    assert (row["requests"], row["billed"]) == (2, len(body))  # the uncompressed bytes the accepted one sent


def test_an_export_aws_would_refuse_is_refused_with_its_reason(emulator: str) -> None:
    _model(emulator, [{"Effect": "Allow", "Action": "xray:PutTraceSegments", "Resource": "*"}])
    assert _export(emulator, _spans("x"), key=None)[1]["type"] == "MissingAuthenticationTokenException"
    status, answer = _export(emulator, _spans("big", attribute="x" * (traces.MAX_SPAN_BYTES + 1)))
    assert (status, answer["type"]) == (400, "ValidationException")
    assert "span 'big' is" in answer["Message"] and str(traces.MAX_SPAN_BYTES) in answer["Message"]
    status, answer = _export(emulator, b"\x1f\x8b not really gzip", compress=False)
    assert (status, answer["type"]) == (400, "ValidationException") and "not gzip" in answer["Message"]
    many = _spans(*["s"] * (traces.MAX_REQUEST_SPANS + 1))
    assert "spans; the limit is 10000" in _export(emulator, many)[1]["Message"]
    assert traces.STORE.find(correlation_id="corr-iam") == []
