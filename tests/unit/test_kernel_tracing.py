"""Tracing: every kernel entry point (and the scores authorizer, which is built on none of them) runs its
handler in Powertools Tracer's ``## handler`` subsegment, never captures the response, and annotates the
correlation id: per record for a queue consumer, per request for an API, per batch for an outbox
publisher whose rows share one.

The Tracer here is Powertools' own, on a provider that records subsegments instead of sending them to an
X-Ray daemon (there is none: the tests set POWERTOOLS_TRACE_DISABLED, so ``relay.observability.tracer()``
is None everywhere else).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from aws_lambda_powertools.tracing import Tracer
from aws_lambda_powertools.tracing.base import BaseProvider, BaseSegment

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


class RecordedSegment(BaseSegment):
    def __init__(self, name: str, parent: RecordedSegment | None) -> None:
        self.name = name
        self.parent = parent
        self.annotations: dict[str, Any] = {}
        self.metadata: dict[str, Any] = {}
        self.exceptions: list[BaseException] = []

    def close(self, end_time: int | None = None) -> None:
        pass

    def add_subsegment(self, subsegment: Any) -> None:
        pass

    def remove_subsegment(self, subsegment: Any) -> None:
        pass

    def put_annotation(self, key: str, value: Any) -> None:
        self.annotations[key] = value

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        self.metadata[f"{namespace}/{key}"] = value

    def add_exception(self, exception: BaseException, stack: Any, remote: bool = False) -> None:
        self.exceptions.append(exception)


class RecordingProvider(BaseProvider):
    """An X-Ray provider that keeps every subsegment opened, with its parent, annotations and metadata."""

    def __init__(self) -> None:
        self.segments: list[RecordedSegment] = []
        self._open: list[RecordedSegment] = []

    @contextmanager
    def in_subsegment(self, name: Any = None, **kwargs: Any) -> Iterator[RecordedSegment]:
        segment = RecordedSegment(str(name), self._open[-1] if self._open else None)
        self.segments.append(segment)
        self._open.append(segment)
        try:
            yield segment
        except Exception as exc:
            segment.add_exception(exc, [])
            raise
        finally:
            self._open.pop()

    def in_subsegment_async(self, name: Any = None, **kwargs: Any) -> Any:
        raise NotImplementedError

    def put_annotation(self, key: str, value: Any) -> None:
        self._open[-1].put_annotation(key, value)

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        self._open[-1].put_metadata(key, value, namespace)

    def patch(self, modules: Any) -> None:
        pass

    def patch_all(self) -> None:
        pass

    def named(self, name: str) -> list[RecordedSegment]:
        return [s for s in self.segments if s.name == name]


@pytest.fixture
def traces(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingProvider]:
    # Tracer keeps its configuration on the class (a "disabled" from an earlier Tracer would stick).
    Tracer._reset_config()
    provider = RecordingProvider()
    tracer = Tracer(service="relay-tests", disabled=False, auto_patch=False, provider=provider)
    monkeypatch.setattr(observability, "_tracer", tracer)
    monkeypatch.setattr(observability, "_tracer_loaded", True)
    yield provider
    Tracer._reset_config()


def test_without_a_tracer_the_handler_is_left_as_it_is() -> None:
    # The suite runs with POWERTOOLS_TRACE_DISABLED=true (tests/conftest.py), as the sandbox does.
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return {}

    assert observability.tracer() is None
    assert observability.trace_handler(handler) is handler


def test_a_queue_consumer_traces_each_record_in_its_own_subsegment_annotated_with_its_correlation_id(
    traces: RecordingProvider, monkeypatch: pytest.MonkeyPatch
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
    assert [r.annotations for r in records] == [{"correlation_id": "corr-a"}, {"correlation_id": "corr-b"}]
    assert all(r.parent is outer for r in records)
    assert set(outer.annotations) == {"ColdStart", "Service"}
    assert outer.metadata == {}, "the response is not captured"


def test_a_failing_record_is_recorded_on_its_own_subsegment(
    traces: RecordingProvider, monkeypatch: pytest.MonkeyPatch
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
    assert [type(e).__name__ for e in bad.exceptions] == ["BusinessRejection"]
    assert (bad.annotations, ok.annotations, ok.exceptions) == (
        {"correlation_id": "corr-bad"},
        {"correlation_id": "corr-ok"},
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


def _outbox_handler() -> Any:
    from relay.outbox import outbox_handler

    class Wiring:
        sns = FakeSns()
        ddb = FakeDdb()

    return outbox_handler(
        lambda: Wiring(),  # type: ignore[arg-type, type-var]
        topic_arn=lambda _w: "arn:aws:sns:us-east-1:123456789012:relay-events",
        table_name=lambda _w: "relay-table",
    )


def test_an_outbox_publisher_annotates_its_handler_with_the_correlation_id_its_records_share(
    traces: RecordingProvider,
) -> None:
    event = ddb_stream_event(
        [item_insert(envelope(correlation_id="corr-a")), item_insert(envelope(correlation_id="corr-a"))]
    )

    assert _outbox_handler()(event, FakeContext()) == {"batchItemFailures": []}

    (outer,) = traces.named("## handler")
    assert outer.annotations["correlation_id"] == "corr-a"
    assert outer.metadata == {}, "the response is not captured"


def test_an_outbox_batch_of_several_requests_is_annotated_with_none_of_them(
    traces: RecordingProvider,
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
    traces: RecordingProvider, headers: dict[str, str], correlation_id: str
) -> None:
    from relay import api

    handler = api.lambda_handler(FakeApp(), max_body_bytes=lambda: 1000)

    assert handler(_http_event(**headers), FakeContext())["statusCode"] == 200

    (outer,) = traces.named("## handler")
    assert outer.annotations["correlation_id"] == correlation_id
    assert outer.metadata == {}, "the response (the resource returned) is not captured"


def test_a_hostile_correlation_id_is_cut_to_what_x_ray_keeps(traces: RecordingProvider) -> None:
    from relay import api

    api.lambda_handler(FakeApp(), max_body_bytes=lambda: 1000)(
        _http_event(**{"x-correlation-id": "c" * 5000}), FakeContext()
    )

    (outer,) = traces.named("## handler")
    assert outer.annotations["correlation_id"] == "c" * 1000


@pytest.fixture
def authorizer(traces: RecordingProvider) -> Iterator[Any]:
    # The authorizer's handler is decorated at import: import it again with the recording Tracer, and
    # once more afterwards without it.
    import scores.handlers.authorizer as module

    yield importlib.reload(module)
    observability._tracer = None
    importlib.reload(module)


def test_the_scores_authorizer_is_traced_and_annotated_with_the_request_id(
    traces: RecordingProvider, authorizer: Any
) -> None:
    event = {"routeKey": "POST /score-snapshots", "headers": {}, "requestContext": {"requestId": "req-gw-2"}}

    # Without an x-api-key (API Gateway answers 401 before calling us): denied, no secret read.
    assert authorizer.handler(event, FakeContext()) == {"isAuthorized": False}

    (outer,) = traces.named("## handler")
    assert outer.annotations["correlation_id"] == "req-gw-2"
    assert outer.metadata == {}
