"""Tracing (relay.tracing, OpenTelemetry): every kernel entry point (and the scores authorizer, which is
built on none of them) runs its handler in a ``## handler`` span, exports the invocation's spans when it
returns, never records the response, and puts the correlation id on the spans: per record for a queue
consumer (whose record span joins the trace its event was produced in), per request for an API, per
batch for an outbox publisher whose rows share one.

The SDK here is OpenTelemetry's own, with relay.tracing's span processor; only the exporter is replaced,
by one that keeps the OTLP/JSON bodies it would send (the tests set OTEL_SDK_DISABLED elsewhere).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from relay import observability
from tests.builders import (
    FakeContext,
    ddb_stream_event,
    envelope,
    item_insert,
    sns_wrapped,
    sqs_event,
    sqs_record,
)
from tests.unit.fakes import FakeSqs


class Recorded:
    """A span as exported (OTLP/JSON, as relay.tracing sends it), with its parent and attributes."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw
        self.name: str = raw["name"]
        self.trace_id: str = raw["traceId"]
        self.span_id: str = raw["spanId"]
        self.parent_id: str | None = raw.get("parentSpanId")
        self.annotations = {a["key"]: next(iter(a["value"].values())) for a in raw["attributes"]}
        self.exceptions = [e for e in raw.get("events", []) if e["name"] == "exception"]


class RecordingExporter:
    """Stands in for the OTLP endpoint: keeps each export's encoded body."""

    def __init__(self) -> None:
        self.exports: list[dict[str, Any]] = []

    def export(self, spans: Any) -> bool:
        from relay.tracing import encode

        self.exports.append(encode(spans))
        return True

    @property
    def spans(self) -> list[Recorded]:
        return [
            Recorded(s)
            for body in self.exports
            for rs in body["resourceSpans"]
            for ss in rs["scopeSpans"]
            for s in ss["spans"]
        ]

    def named(self, name: str) -> list[Recorded]:
        return [s for s in self.spans if s.name.startswith(name)]


@pytest.fixture
def traces(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingExporter]:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    from relay import tracing

    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    exporter = RecordingExporter()
    buffer = tracing.InvocationBuffer(exporter)  # type: ignore[arg-type]
    provider = TracerProvider(resource=Resource.create({"service.name": "relay-tests"}))
    provider.add_span_processor(buffer)
    monkeypatch.setattr(tracing, "_state", {"tracer": provider.get_tracer("relay"), "buffer": buffer})
    yield exporter


def test_a_queue_consumer_traces_each_record_in_its_own_subsegment_annotated_with_its_correlation_id(
    traces: RecordingExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    from relay.consumer import queue_handler

    monkeypatch.setenv("RELAY_DLQ_URL", "https://sqs.us-east-1.amazonaws.com/123456789012/relay-queue-dlq")

    class Wiring:
        sqs = FakeSqs()

    handled: list[str] = []
    handler = queue_handler(lambda: Wiring(), lambda _w, env, _ctx: handled.append(env.correlation_id))  # type: ignore[arg-type, type-var]
    event = sqs_event(
        [
            sqs_record(sns_wrapped(envelope(correlation_id="corr-a"))),
            sqs_record(sns_wrapped(envelope(correlation_id="corr-b"))),
        ]
    )

    assert handler(event, FakeContext()) == {"batchItemFailures": []}

    assert handled == ["corr-a", "corr-b"]
    (outer,) = traces.named("## handler")
    records = traces.named("## record")
    assert [r.annotations["correlation_id"] for r in records] == ["corr-a", "corr-b"]
    assert all(r.annotations["aws.xray.annotations"] for r in records), "indexed by X-Ray"
    # No traceparent in these envelopes: the records hang under the handler's span.
    assert all(r.parent_id == outer.span_id and r.trace_id == outer.trace_id for r in records)
    assert "correlation_id" not in outer.annotations
    assert len(traces.exports) == 1, "one export when the invocation ends"


def test_a_record_span_joins_the_trace_its_event_was_produced_in(
    traces: RecordingExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    from relay.consumer import queue_handler

    monkeypatch.setenv("RELAY_DLQ_URL", "https://sqs.us-east-1.amazonaws.com/123456789012/relay-queue-dlq")

    class Wiring:
        sqs = FakeSqs()

    produced = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    handler = queue_handler(lambda: Wiring(), lambda _w, _env, _ctx: None)  # type: ignore[arg-type, type-var]
    record = sns_wrapped(envelope(correlation_id="corr-a").model_copy(update={"traceparent": produced}))
    handler(sqs_event([sqs_record(record)]), FakeContext())

    (span,) = traces.named("## record")
    assert (span.trace_id, span.parent_id) == ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")


def test_an_event_produced_inside_a_record_carries_that_records_span_as_its_traceparent(
    traces: RecordingExporter,
) -> None:
    from relay.envelope import new_envelope

    with observability.record_subsegment("corr-a"):
        produced = new_envelope(
            "Thing", identity=("t-1",), ids={"thingId": "t-1"}, payload={}, correlation_id="c"
        )
    observability_flush()
    (span,) = traces.named("## record")
    assert produced.traceparent == f"00-{span.trace_id}-{span.span_id}-01"
    assert produced.to_dict()["traceparent"] == produced.traceparent


def test_a_malformed_traceparent_is_dropped_not_a_reason_to_park() -> None:
    from relay.envelope import Envelope

    data = {**envelope(correlation_id="c").to_dict(), "traceparent": "not-a-traceparent"}
    assert Envelope.from_dict(data).traceparent is None


def observability_flush() -> None:
    from relay import tracing

    tracing.flush()


def test_a_failing_record_is_recorded_on_its_own_subsegment(
    traces: RecordingExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    from relay.consumer import queue_handler
    from relay.errors import BusinessRejection

    monkeypatch.setenv("RELAY_DLQ_URL", "https://sqs.us-east-1.amazonaws.com/123456789012/relay-queue-dlq")

    class Wiring:
        sqs = FakeSqs()

    def reject(_w: Any, env: Any, _ctx: Any) -> None:
        if env.correlation_id == "corr-bad":
            raise BusinessRejection("rejected for the test")

    handler = queue_handler(lambda: Wiring(), reject)  # type: ignore[arg-type, type-var]
    event = sqs_event(
        [
            sqs_record(sns_wrapped(envelope(correlation_id="corr-bad"))),
            sqs_record(sns_wrapped(envelope(correlation_id="corr-ok"))),
        ]
    )

    assert handler(event, FakeContext()) == {"batchItemFailures": []}  # parked, so handled

    bad, ok = traces.named("## record")
    assert [e["attributes"][0]["value"]["stringValue"] for e in bad.exceptions] == [
        "relay.errors.BusinessRejection"
    ]
    assert bad.raw["status"]["code"] == 2
    assert (bad.annotations["correlation_id"], ok.annotations["correlation_id"], ok.exceptions) == (
        "corr-bad",
        "corr-ok",
        [],
    )


class FakeSns:
    def __init__(self) -> None:
        self.published: list[dict[str, Any]] = []

    def publish(self, **params: Any) -> dict[str, Any]:
        self.published.append(params)
        return {"MessageId": f"m-{len(self.published)}"}

    def publish_batch(self, **params: Any) -> dict[str, Any]:
        entries = params["PublishBatchRequestEntries"]
        for entry in entries:
            self.published.append({"TopicArn": params["TopicArn"], **entry})
        return {"Successful": [{"Id": e["Id"], "MessageId": f"m-{e['Id']}"} for e in entries], "Failed": []}


class FakeDdb:
    def update_item(self, **params: Any) -> dict[str, Any]:
        return {}


def _outbox_handler(sns: FakeSns | None = None) -> Any:
    from relay.outbox import outbox_handler

    class Wiring:
        pass

    Wiring.sns = sns or FakeSns()  # type: ignore[attr-defined]
    Wiring.ddb = FakeDdb()  # type: ignore[attr-defined]

    return outbox_handler(
        lambda: Wiring(),  # type: ignore[arg-type, type-var]
        topic_arn=lambda _w: "arn:aws:sns:us-east-1:123456789012:relay-events",
        table_name=lambda _w: "relay-table",
    )


def test_an_outbox_publisher_annotates_its_handler_with_the_correlation_id_its_records_share(
    traces: RecordingExporter,
) -> None:
    event = ddb_stream_event(
        [item_insert(envelope(correlation_id="corr-a")), item_insert(envelope(correlation_id="corr-a"))]
    )

    assert _outbox_handler()(event, FakeContext()) == {"batchItemFailures": []}

    (outer,) = traces.named("## handler")
    assert outer.annotations["correlation_id"] == "corr-a"


def test_an_outbox_publish_is_a_span_in_the_events_trace_and_the_message_carries_it(
    traces: RecordingExporter,
) -> None:
    produced = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    event = ddb_stream_event(
        [item_insert(envelope(correlation_id="corr-a").model_copy(update={"traceparent": produced}))]
    )
    sns = FakeSns()
    assert _outbox_handler(sns)(event, FakeContext()) == {"batchItemFailures": []}

    (send,) = traces.named("publish ")
    assert (send.trace_id, send.parent_id) == ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")
    assert send.raw["kind"] == 4 and send.annotations["correlation_id"] == "corr-a"
    (message,) = sns.published
    assert json.loads(message["Message"])["traceparent"] == f"00-{send.trace_id}-{send.span_id}-01"


def test_an_outbox_batch_of_several_requests_is_annotated_with_none_of_them(
    traces: RecordingExporter,
) -> None:
    event = ddb_stream_event(
        [item_insert(envelope(correlation_id="corr-a")), item_insert(envelope(correlation_id="corr-b"))]
    )

    assert _outbox_handler()(event, FakeContext()) == {"batchItemFailures": []}

    (outer,) = traces.named("## handler")
    assert "correlation_id" not in outer.annotations


class FakeApp:
    """What ``relay.api.resolve`` calls: the resolver's ``resolve(event, context)``."""

    def resolve(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"statusCode": 200, "body": '{"amount": "12.50"}'}


def _http_event(**headers: str) -> dict[str, Any]:
    return {
        "version": "2.0",
        "headers": headers,
        "requestContext": {"requestId": "req-gw-1", "http": {"method": "GET", "path": "/x"}},
        "rawPath": "/x",
    }


@pytest.mark.parametrize(
    ("headers", "correlation_id"),
    [({"x-correlation-id": "corr-caller"}, "corr-caller"), ({}, "req-gw-1")],
    ids=["the caller's x-correlation-id", "else API Gateway's request id"],
)
def test_an_api_annotates_its_handler_with_the_correlation_id_its_events_carry(
    traces: RecordingExporter, headers: dict[str, str], correlation_id: str
) -> None:
    from relay import api

    handler = api.lambda_handler(FakeApp(), max_body_bytes=lambda: 1000)

    assert handler(_http_event(**headers), FakeContext())["statusCode"] == 200

    (outer,) = traces.named("## handler")
    assert outer.annotations["correlation_id"] == correlation_id
    assert "12.50" not in str(traces.exports), "the response (the resource returned) is not recorded"


def test_a_hostile_correlation_id_is_cut_to_what_x_ray_keeps(traces: RecordingExporter) -> None:
    from relay import api

    api.lambda_handler(FakeApp(), max_body_bytes=lambda: 1000)(
        _http_event(**{"x-correlation-id": "c" * 5000}), FakeContext()
    )

    (outer,) = traces.named("## handler")
    assert outer.annotations["correlation_id"] == "c" * 1000


@pytest.fixture
def authorizer(traces: RecordingExporter) -> Iterator[Any]:
    # The authorizer's handler is decorated at import: import it again with the recording Tracer, and
    # once more afterwards without it.
    import scores.handlers.authorizer as module

    yield importlib.reload(module)


def test_the_scores_authorizer_is_traced_and_annotated_with_the_request_id(
    traces: RecordingExporter, authorizer: Any
) -> None:
    event = {"routeKey": "POST /score-snapshots", "headers": {}, "requestContext": {"requestId": "req-gw-2"}}

    # Without an x-api-key (API Gateway answers 401 before calling us): denied, no secret read.
    assert authorizer.handler(event, FakeContext()) == {"isAuthorized": False}

    (outer,) = traces.named("## handler")
    assert outer.annotations["correlation_id"] == "req-gw-2"
