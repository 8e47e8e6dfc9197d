"""relay.consumer with in-memory fakes: partial batch responses, FIFO stop, parking, backoff."""

import json
from typing import Any

import pytest

from relay.consumer import ConsumerSettings, RecordContext, consume, queue_url_from_arn
from relay.envelope import Envelope
from relay.errors import BusinessRejection, DependencyUnavailable
from tests.builders import FakeContext, envelope, fifo_record, sns_wrapped, sqs_event, sqs_record
from tests.unit.fakes import FakeSqs

SETTINGS = ConsumerSettings(
    queue_url="https://sqs.us-east-1.amazonaws.com/123456789012/relay-queue",
    dlq_url="https://sqs.us-east-1.amazonaws.com/123456789012/relay-dlq",
    backoff_base_seconds=2,
    backoff_cap_seconds=900,
)


def failures(response: dict[str, Any]) -> list[str]:
    return [f["itemIdentifier"] for f in response["batchItemFailures"]]


def fail_third(error: Exception) -> tuple[list[str], Any]:
    envelopes = [envelope(payload={"n": n}) for n in range(10)]
    poison_id = envelopes[2].event_id
    handled: list[int] = []

    def handle(env: Envelope, ctx: RecordContext) -> None:
        if env.event_id == poison_id:
            raise error
        handled.append(int(env.payload["n"]))  # type: ignore[index]

    return [sns_wrapped(e) for e in envelopes], (handle, handled)


def test_standard_queue_reports_only_the_failed_message() -> None:
    bodies, (handle, handled) = fail_third(DependencyUnavailable("payment system timed out"))
    records = [sqs_record(b, message_id=f"m-{i}") for i, b in enumerate(bodies)]
    sqs = FakeSqs()
    response = consume(sqs_event(records), FakeContext(), handle, settings=SETTINGS, sqs_client=sqs)
    assert failures(response) == ["m-2"]
    assert handled == [0, 1, 3, 4, 5, 6, 7, 8, 9]
    # The transient failure was backed off before being reported.
    assert [v["ReceiptHandle"] for v in sqs.visibility] == ["rh-m-2"]


def test_fifo_queue_reports_the_failure_and_every_later_record_without_processing_them() -> None:
    bodies, (handle, handled) = fail_third(DependencyUnavailable("payment system timed out"))
    records = [fifo_record(b, message_id=f"m-{i}") for i, b in enumerate(bodies)]
    response = consume(sqs_event(records), FakeContext(), handle, settings=SETTINGS, sqs_client=FakeSqs())
    assert failures(response) == [f"m-{i}" for i in range(2, 10)]
    assert handled == [0, 1]


def test_fifo_is_detected_from_the_event_source_arn() -> None:
    bodies, (handle, _) = fail_third(DependencyUnavailable("down"))
    records = [fifo_record(b, message_id=f"m-{i}") for i, b in enumerate(bodies)]
    forced_standard = consume(
        sqs_event(records), FakeContext(), handle, settings=SETTINGS, sqs_client=FakeSqs(), fifo=False
    )
    assert failures(forced_standard) == ["m-2"]


def test_fifo_permanent_failure_is_parked_and_processing_continues() -> None:
    bodies, (handle, handled) = fail_third(BusinessRejection("amount must be positive"))
    records = [fifo_record(b, message_id=f"m-{i}", group_id="op-1") for i, b in enumerate(bodies)]
    sqs = FakeSqs()
    response = consume(sqs_event(records), FakeContext(), handle, settings=SETTINGS, sqs_client=sqs)
    assert failures(response) == []
    assert handled == [0, 1, 3, 4, 5, 6, 7, 8, 9]
    assert [s["MessageAttributes"]["relay.originalMessageId"]["StringValue"] for s in sqs.sent] == ["m-2"]


def test_permanent_failure_is_parked_with_reason_and_acknowledged() -> None:
    bodies, (handle, _) = fail_third(BusinessRejection("card declined"))
    records = [sqs_record(b, message_id=f"m-{i}") for i, b in enumerate(bodies)]
    sqs = FakeSqs()
    response = consume(sqs_event(records), FakeContext(), handle, settings=SETTINGS, sqs_client=sqs)
    assert failures(response) == []
    (parked,) = sqs.sent
    assert parked["QueueUrl"] == SETTINGS.dlq_url
    assert parked["MessageBody"] == bodies[2]
    assert parked["MessageAttributes"]["relay.errorClass"]["StringValue"] == "BusinessRejection"
    assert parked["MessageAttributes"]["relay.errorMessage"]["StringValue"] == "card declined"
    assert sqs.visibility == []  # parked messages are not backed off


def test_parking_failure_reports_the_record_failed_so_sqs_keeps_it() -> None:
    bodies, (handle, _) = fail_third(BusinessRejection("card declined"))
    records = [sqs_record(b, message_id=f"m-{i}") for i, b in enumerate(bodies)]
    response = consume(
        sqs_event(records), FakeContext(), handle, settings=SETTINGS, sqs_client=FakeSqs(fail_send=True)
    )
    assert failures(response) == ["m-2"]


def test_without_a_dlq_url_a_permanent_failure_is_kept_not_dropped() -> None:
    bodies, (handle, _) = fail_third(BusinessRejection("card declined"))
    records = [sqs_record(b, message_id=f"m-{i}") for i, b in enumerate(bodies)]
    settings = ConsumerSettings(queue_url=SETTINGS.queue_url, dlq_url=None)
    response = consume(sqs_event(records), FakeContext(), handle, settings=settings, sqs_client=FakeSqs())
    assert failures(response) == ["m-2"]


def test_malformed_json_is_parked_without_calling_the_handler() -> None:
    calls: list[Envelope] = []
    sqs = FakeSqs()
    response = consume(
        sqs_event([sqs_record("{oops", message_id="bad")]),
        FakeContext(),
        lambda env, ctx: calls.append(env),
        settings=SETTINGS,
        sqs_client=sqs,
    )
    assert failures(response) == [] and calls == []
    assert "not valid JSON" in sqs.sent[0]["MessageAttributes"]["relay.errorMessage"]["StringValue"]


def test_all_failed_batch_returns_every_message_id_instead_of_raising() -> None:
    def handle(env: Envelope, ctx: RecordContext) -> None:
        raise DependencyUnavailable("down")

    records = [sqs_record(envelope(), message_id=f"m-{i}") for i in range(3)]
    sqs = FakeSqs()
    response = consume(sqs_event(records), FakeContext(), handle, settings=SETTINGS, sqs_client=sqs)
    assert failures(response) == ["m-0", "m-1", "m-2"]
    assert len(sqs.visibility) == 3


def test_backoff_failure_still_reports_the_record_failed() -> None:
    def handle(env: Envelope, ctx: RecordContext) -> None:
        raise DependencyUnavailable("down")

    response = consume(
        sqs_event([sqs_record(envelope(), message_id="m-0"), sqs_record(envelope(), message_id="m-1")]),
        FakeContext(),
        handle,
        settings=SETTINGS,
        sqs_client=FakeSqs(fail_visibility=True),
    )
    assert failures(response) == ["m-0", "m-1"]


def test_unknown_exception_is_retried_with_backoff_not_parked() -> None:
    def handle(env: Envelope, ctx: RecordContext) -> None:
        raise KeyError("bug")

    sqs = FakeSqs()
    response = consume(
        sqs_event([sqs_record(envelope(), message_id="m-0", receive_count=4)]),
        FakeContext(),
        handle,
        settings=ConsumerSettings(queue_url="https://q", dlq_url="https://d", backoff_base_seconds=2),
        sqs_client=sqs,
    )
    assert failures(response) == ["m-0"]
    assert sqs.sent == []
    assert 16 <= sqs.visibility[0]["VisibilityTimeout"] <= 20


def test_record_context_exposes_the_delivery() -> None:
    seen: list[RecordContext] = []
    record = sqs_record(envelope(), message_id="m-1", receive_count=3, first_received_ms=1_700_000_000_000)
    consume(
        sqs_event([record]),
        FakeContext(),
        lambda env, ctx: seen.append(ctx),
        settings=SETTINGS,
        sqs_client=FakeSqs(),
    )
    (ctx,) = seen
    assert (ctx.message_id, ctx.receipt_handle, ctx.receive_count) == ("m-1", "rh-m-1", 3)
    assert ctx.first_received_at is not None and ctx.first_received_at.timestamp() == 1_700_000_000
    assert ctx.queue_url == SETTINGS.queue_url
    assert ctx.record is record


def test_queue_url_is_derived_from_the_arn_when_not_configured() -> None:
    seen: list[str] = []
    consume(
        sqs_event([sqs_record(envelope(), queue="orders-inventory")]),
        FakeContext(),
        lambda env, ctx: seen.append(ctx.queue_url),
        settings=ConsumerSettings(),
        sqs_client=FakeSqs(),
    )
    assert seen == ["https://sqs.us-east-1.amazonaws.com/123456789012/orders-inventory"]


def test_queue_url_from_arn_uses_the_client_endpoint() -> None:
    class Emulator:
        class meta:
            endpoint_url = "http://127.0.0.1:5000"

    assert queue_url_from_arn("arn:aws:sqs:eu-west-1:111:q", Emulator()) == "http://127.0.0.1:5000/111/q"
    assert queue_url_from_arn("arn:aws:sqs:eu-west-1:111:q") == "https://sqs.eu-west-1.amazonaws.com/111/q"


def test_settings_are_read_from_the_environment_with_defaults() -> None:
    settings = ConsumerSettings.from_env({"RELAY_DLQ_URL": "https://d", "RELAY_BACKOFF_CAP_SECONDS": "60"})
    assert (settings.dlq_url, settings.queue_url) == ("https://d", None)
    assert (settings.backoff_base_seconds, settings.backoff_cap_seconds) == (2.0, 60.0)
    with pytest.raises(ValueError, match="RELAY_BACKOFF_BASE_SECONDS='fast' is not a number"):
        ConsumerSettings.from_env({"RELAY_BACKOFF_BASE_SECONDS": "fast"})


def test_correlation_id_is_on_log_lines_during_the_handler_and_cleared_after() -> None:
    from relay.observability import logger

    seen: list[str | None] = []
    consume(
        sqs_event([sqs_record(envelope(correlation_id="corr-42"))]),
        FakeContext(),
        lambda env, ctx: seen.append(logger().get_correlation_id()),
        settings=SETTINGS,
        sqs_client=FakeSqs(),
    )
    assert seen == ["corr-42"]
    assert logger().get_correlation_id() is None


def emf_lines(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith('{"_aws"')]


def test_outcomes_are_counted_as_emf_metrics_per_event_type(capsys: pytest.CaptureFixture[str]) -> None:
    def handle(env: Envelope, ctx: RecordContext) -> None:
        if env.event_type == "Poison":
            raise BusinessRejection("no")
        if env.event_type == "Flaky":
            raise DependencyUnavailable("later")

    records = [sqs_record(envelope("Good")), sqs_record(envelope("Good")), sqs_record(envelope("Poison"))]
    records.append(sqs_record(envelope("Flaky")))
    consume(sqs_event(records), FakeContext(), handle, settings=SETTINGS, sqs_client=FakeSqs())
    counts: dict[tuple[str, str, str], float] = {}
    for line in emf_lines(capsys.readouterr().out):
        (directive,) = line["_aws"]["CloudWatchMetrics"]
        # {service} alone lets an alarm watch a metric across every eventType of the service.
        assert directive["Dimensions"] == [["service", "eventType"], ["service"]]
        for metric in directive["Metrics"]:
            key = (metric["Name"], line["eventType"], line["service"])
            counts[key] = counts.get(key, 0) + line[metric["Name"]]
    service = "relay-tests"
    assert counts == {
        ("Processed", "Good", service): 2,
        ("Parked", "Poison", service): 1,
        ("Retried", "Flaky", service): 1,
    }


def test_a_batchs_metrics_of_one_event_type_share_one_emf_line(capsys: pytest.CaptureFixture[str]) -> None:
    from relay.observability import metrics_batch, record_metric

    with metrics_batch():
        record_metric("StockReserved", event_type="OrderCreated")
        record_metric("Processed", event_type="OrderCreated")
        record_metric("Processed", event_type="OrderCreated")
        record_metric("Processed", event_type="OrderPaid")
    lines = emf_lines(capsys.readouterr().out)
    assert [
        (line["eventType"], sorted(m["Name"] for m in line["_aws"]["CloudWatchMetrics"][0]["Metrics"]))
        for line in lines
    ] == [
        ("OrderCreated", ["Processed", "StockReserved"]),
        ("OrderPaid", ["Processed"]),
    ]
    assert (lines[0]["Processed"], lines[0]["StockReserved"], lines[1]["Processed"]) == (2, 1, 1)
