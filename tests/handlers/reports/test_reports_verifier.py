"""The verifier: a generated report counts only once it is read back from the public API and matches."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from reports.verification import report_url

from local.fakes.report_api import ReportApiFake
from relay.errors import InvalidInput
from tests.builders import number_attribute, string_attribute
from tests.handlers.reports.conftest import use_queue
from tests.handlers.reports.world import (
    VERIFIER_QUEUE,
    ReportsWorld,
    deliver,
    failed_ids,
    metric_lines,
    redeliver,
    report_generated,
)

CONTENT = b"# Agent report\n\nAll 42 checks passed.\n"
SHA = hashlib.sha256(CONTENT).hexdigest()


@pytest.fixture(autouse=True)
def _verifier_queue(monkeypatch: pytest.MonkeyPatch, world: ReportsWorld) -> None:
    use_queue(monkeypatch, world, VERIFIER_QUEUE)


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retry delays of 0 s (429's Retry-After aside), so a delayed copy is receivable at once."""
    from relay.wiring import reset_all

    monkeypatch.setenv("RELAY_BACKOFF_BASE_SECONDS", "0")
    reset_all()


def verify(
    env: Any, *, receive_count: int = 1, message_attributes: dict[str, Any] | None = None
) -> dict[str, Any]:
    from reports.handlers import verifier

    return deliver(
        verifier.handler,
        env,
        queue=VERIFIER_QUEUE,
        receive_count=receive_count,
        message_attributes=message_attributes,
    )


def verify_again(world: ReportsWorld, message: dict[str, Any]) -> dict[str, Any]:
    """Deliver a message received from the verifier queue (a retry copy), as Lambda would."""
    from reports.handlers import verifier

    return redeliver(verifier.handler, world, VERIFIER_QUEUE, message)


def parked_reasons(world: ReportsWorld) -> list[str]:
    return [m["MessageAttributes"]["relay.errorClass"]["StringValue"] for m in world.parked(VERIFIER_QUEUE)]


# outcomes -------------------------------------------------------------------------------------


def test_report_served_with_the_announced_sha256_is_recorded_verified(
    world: ReportsWorld, report_api: ReportApiFake
) -> None:
    report_api.publish("r-1", CONTENT)

    response = verify(report_generated("r-1", sha256=SHA))

    assert failed_ids(response) == []
    record = world.verification("r-1")
    assert record is not None
    assert record["status"] == "VERIFIED"
    assert record["agentId"] == "agent-a"
    assert record["expectedSha256"] == record["actualSha256"] == SHA
    assert record["attempts"] == 1
    assert record["url"] == f"{report_api.base_url}/reports/r-1"
    assert record["checkedAt"].endswith("Z")
    assert "expiresAt" not in record  # the evidence scores are computed from is kept
    assert parked_reasons(world) == []


def test_the_verification_reads_the_time_from_its_wirings_clock(
    world: ReportsWorld, report_api: ReportApiFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    import relay.wiring

    stopped = (datetime.now(UTC) + timedelta(minutes=2)).replace(microsecond=789000)
    monkeypatch.setattr(relay.wiring, "utc_now", lambda: stopped)
    report_api.publish("r-clock", CONTENT)

    assert failed_ids(verify(report_generated("r-clock", sha256=SHA))) == []

    record = world.verification("r-clock")
    assert record is not None and record["checkedAt"] == stopped.isoformat(timespec="milliseconds")[:-6] + "Z"


def test_report_generated_published_to_the_topic_reaches_the_verifier_and_is_verified(
    world: ReportsWorld, report_api: ReportApiFake
) -> None:
    from reports.handlers import verifier

    from tests.builders import FakeContext

    report_api.publish("r-topic", CONTENT)
    world.publish(report_generated("r-topic", sha256=SHA))

    event = world.lambda_event(VERIFIER_QUEUE)
    assert len(event["Records"]) == 1
    response = verifier.handler(event, FakeContext())

    assert failed_ids(response) == []
    assert world.verification("r-topic")["status"] == "VERIFIED"  # type: ignore[index]


def test_tampered_report_is_recorded_mismatch_counted_and_acknowledged_not_parked(
    world: ReportsWorld, report_api: ReportApiFake, capsys: pytest.CaptureFixture[str]
) -> None:
    report_api.publish("r-bad", CONTENT)
    report_api.set_knobs(tamper_ids="r-bad")

    response = verify(report_generated("r-bad", sha256=SHA))

    assert failed_ids(response) == []  # acknowledged: the record is the evidence
    assert parked_reasons(world) == []  # not parked: a redrive could not change the outcome
    record = world.verification("r-bad")
    assert record is not None
    assert record["status"] == "MISMATCH"
    assert record["expectedSha256"] == SHA
    assert record["actualSha256"] != SHA
    mismatches = metric_lines(capsys.readouterr().out, "VerificationMismatch")
    assert [m["VerificationMismatch"] for m in mismatches] == [1]
    assert mismatches[0]["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [
        ["service", "eventType"],
        ["service"],
    ]


def test_verified_report_emits_no_mismatch_metric(
    world: ReportsWorld, report_api: ReportApiFake, capsys: pytest.CaptureFixture[str]
) -> None:
    report_api.publish("r-1", CONTENT)

    verify(report_generated("r-1", sha256=SHA))

    assert metric_lines(capsys.readouterr().out, "VerificationMismatch") == []


def test_report_not_visible_yet_is_retried_with_backoff_then_verified(
    world: ReportsWorld, report_api: ReportApiFake
) -> None:
    report_api.publish("r-late", CONTENT, invisible_reads=2)
    env = report_generated("r-late", sha256=SHA)
    queue_url = world.queues[VERIFIER_QUEUE].url

    first = verify(env)
    assert failed_ids(first) == []  # handled: a delayed copy on the queue carries the retry
    # Backed off (RELAY_BACKOFF_BASE_SECONDS=1 here): the copy is not back at once.
    assert "Messages" not in world.sqs.receive_message(QueueUrl=queue_url)
    copy = world.retry_copy(VERIFIER_QUEUE, env, attempt=1)
    second = verify_again(world, copy)
    assert failed_ids(second) == []
    copy = world.retry_copy(VERIFIER_QUEUE, env, attempt=2)
    assert copy["Attributes"]["ApproximateReceiveCount"] == "1"  # a new message: its count restarts
    assert world.verification("r-late") is None
    assert parked_reasons(world) == []

    third = verify_again(world, copy)

    assert failed_ids(third) == []
    record = world.verification("r-late")
    assert record is not None
    assert record["status"] == "VERIFIED"
    assert record["attempts"] == 3  # counted across the chain, not the last copy's receives
    assert report_api.reads() == {"r-late": 3}
    assert "Messages" not in world.sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=1)
    assert parked_reasons(world) == []


def test_a_retry_copy_counts_the_chains_attempts_and_the_age_from_the_events_occurred_at(
    world: ReportsWorld, report_api: ReportApiFake
) -> None:
    # The third retry copy of a report generated 3601 s ago, on its second receive (the first one
    # crashed the function). Its ApproximateReceiveCount (2) and ApproximateFirstReceiveTimestamp
    # (just now) describe this copy alone; relay.attempt and the envelope describe the whole chain.
    generated = datetime.now(UTC) - timedelta(seconds=3601)
    third_copy = {
        "relay.attempt": number_attribute("3"),
        "relay.firstFailureAt": number_attribute(str(int(generated.timestamp()) + 1)),
        "relay.lastError": string_attribute("report API answered 404 for report r-gone"),
    }

    response = verify(
        report_generated("r-gone", sha256=SHA, occurred_at=generated),
        receive_count=2,
        message_attributes=third_copy,
    )

    assert failed_ids(response) == []
    record = world.verification("r-gone")
    assert record is not None
    assert record["status"] == "UNREACHABLE"  # aged out by occurredAt, not by this copy's receive
    assert record["attempts"] == 5  # the original, copies 1 and 2, and this copy's two receives
    assert parked_reasons(world) == []


def test_report_still_missing_after_the_maximum_age_is_recorded_unreachable(
    world: ReportsWorld, report_api: ReportApiFake
) -> None:
    generated = datetime.now(UTC) - timedelta(seconds=3601)

    response = verify(report_generated("r-gone", sha256=SHA, occurred_at=generated), receive_count=9)

    assert failed_ids(response) == []
    record = world.verification("r-gone")
    assert record is not None
    assert record["status"] == "UNREACHABLE"
    assert "actualSha256" not in record
    assert record["attempts"] == 9
    assert parked_reasons(world) == []


def test_missing_report_just_under_the_maximum_age_is_still_retried(
    world: ReportsWorld, report_api: ReportApiFake, fast_retries: None
) -> None:
    generated = datetime.now(UTC) - timedelta(seconds=3500)
    env = report_generated("r-gone", sha256=SHA, occurred_at=generated)

    response = verify(env)

    assert failed_ids(response) == []  # handled: the retry travels as a delayed copy
    world.retry_copy(VERIFIER_QUEUE, env, attempt=1)
    assert world.verification("r-gone") is None
    assert parked_reasons(world) == []


@pytest.mark.parametrize("knob", [{"outage": True}, {"fail_rate_429": 1.0}])
def test_report_api_5xx_or_429_is_transient_and_records_nothing(
    world: ReportsWorld, report_api: ReportApiFake, knob: dict[str, Any], fast_retries: None
) -> None:
    report_api.publish("r-1", CONTENT)
    report_api.set_knobs(**knob)
    env = report_generated("r-1", sha256=SHA)

    response = verify(env)

    assert failed_ids(response) == []  # handled: the retry travels as a delayed copy
    world.retry_copy(VERIFIER_QUEUE, env, attempt=1)  # 429: after its Retry-After (1 s)
    assert world.verification("r-1") is None
    assert parked_reasons(world) == []


def test_report_api_timeout_is_transient(
    world: ReportsWorld, report_api: ReportApiFake, monkeypatch: pytest.MonkeyPatch, fast_retries: None
) -> None:
    from relay.wiring import reset_all

    monkeypatch.setenv("HTTP_TIMEOUT_SECONDS", "0.3")
    reset_all()
    report_api.publish("r-1", CONTENT)
    report_api.set_knobs(timeout_rate=1.0, timeout_sleep_s=3.0)
    env = report_generated("r-1", sha256=SHA)

    response = verify(env)

    assert failed_ids(response) == []  # handled: the retry travels as a delayed copy
    world.retry_copy(VERIFIER_QUEUE, env, attempt=1)
    assert world.verification("r-1") is None
    assert parked_reasons(world) == []


def test_event_without_a_valid_sha256_is_parked_as_invalid_input(
    world: ReportsWorld, report_api: ReportApiFake
) -> None:
    response = verify(report_generated("r-1", sha256="not-a-digest"))

    assert failed_ids(response) == []
    assert parked_reasons(world) == ["InvalidInput"]
    assert report_api.calls() == []


# duplicates ------------------------------------------------------------------------------------


def test_duplicate_delivery_is_acknowledged_with_one_record_and_no_second_read(
    world: ReportsWorld, report_api: ReportApiFake, capsys: pytest.CaptureFixture[str]
) -> None:
    report_api.publish("r-bad", CONTENT)
    report_api.set_knobs(tamper_ids="r-bad")
    env = report_generated("r-bad", sha256=SHA)
    verify(env)
    first = world.verification("r-bad")

    again = verify(env, receive_count=2)

    assert failed_ids(again) == []
    assert world.verification_count() == 1
    assert world.verification("r-bad") == first  # checkedAt, attempts: untouched
    assert report_api.reads() == {"r-bad": 1}
    assert len(metric_lines(capsys.readouterr().out, "VerificationMismatch")) == 1  # counted once


def test_concurrent_duplicate_that_misses_the_early_read_is_stopped_by_the_records_condition(
    world: ReportsWorld, report_api: ReportApiFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reports.wiring import wiring

    report_api.publish("r-1", CONTENT)
    env = report_generated("r-1", sha256=SHA)
    verify(env)
    first = world.verification("r-1")
    # Both consumers read "no record yet" before either wrote (visibility lapsed mid-flight).
    monkeypatch.setattr(wiring().verification.store, "get", lambda _report_id: None)

    again = verify(env, receive_count=2)

    assert failed_ids(again) == []
    assert world.verification("r-1") == first
    assert world.verification_count() == 1


def test_replay_under_another_event_id_cannot_overwrite_a_final_outcome(
    world: ReportsWorld, report_api: ReportApiFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reports.wiring import wiring

    report_api.publish("r-1", CONTENT)
    verify(report_generated("r-1", sha256=SHA))
    first = world.verification("r-1")
    report_api.set_knobs(tamper_ids="r-1")  # the content changed since: a re-check would say MISMATCH
    monkeypatch.setattr(wiring().verification.store, "get", lambda _report_id: None)

    replay = verify(report_generated("r-1", sha256=SHA, identity=["r-1", "republished"]))

    assert failed_ids(replay) == []
    assert world.verification("r-1") == first
    assert first is not None and first["status"] == "VERIFIED"


def test_same_report_announced_with_another_sha256_is_parked_and_the_record_kept(
    world: ReportsWorld, report_api: ReportApiFake
) -> None:
    report_api.publish("r-1", CONTENT)
    verify(report_generated("r-1", sha256=SHA))
    first = world.verification("r-1")

    response = verify(report_generated("r-1", sha256="ab" * 32, identity=["r-1", "regenerated"]))

    assert failed_ids(response) == []
    assert parked_reasons(world) == ["ReportAlreadyRecorded"]
    assert world.verification("r-1") == first


# SSRF guard ------------------------------------------------------------------------------------


def test_event_url_under_the_report_api_is_the_one_read(
    world: ReportsWorld, report_api: ReportApiFake
) -> None:
    report_api.publish("r-1", CONTENT)
    url = f"{report_api.base_url}/reports/r-1"

    verify(report_generated("r-2", sha256=SHA, url=url))

    record = world.verification("r-2")
    assert record is not None and record["status"] == "VERIFIED" and record["url"] == url


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
        "{base}.evil.example/reports/r-1",
        "{base}@evil.example/reports/r-1",
        "{base}/reports/../../admin",
        "{base}/reports/%2e%2e/admin",
        "https://{host}/reports/r-1",
        "{base}/reports/r-1#fragment",
    ],
)
def test_event_url_outside_the_report_api_is_parked_without_any_request(
    world: ReportsWorld, report_api: ReportApiFake, url: str
) -> None:
    base = report_api.base_url
    url = url.format(base=base, host=base.removeprefix("http://"))
    report_api.publish("r-1", CONTENT)

    response = verify(report_generated("r-1", sha256=SHA, url=url))

    assert failed_ids(response) == []
    assert parked_reasons(world) == ["InvalidInput"]
    assert report_api.calls() == []
    assert world.verification("r-1") is None


def test_report_url_without_an_event_url_is_built_from_the_base_and_the_quoted_id() -> None:
    assert (
        report_url("https://reports.example.com/v1/", "r-1", None)
        == "https://reports.example.com/v1/reports/r-1"
    )
    assert report_url("https://reports.example.com/v1", "r:1", None).endswith("/reports/r%3A1")


def test_report_url_under_a_base_path_must_stay_under_it() -> None:
    base = "https://reports.example.com/v1"
    assert report_url(base, "r-1", f"{base}/reports/r-1") == f"{base}/reports/r-1"
    with pytest.raises(InvalidInput):
        report_url(base, "r-1", "https://reports.example.com/v10/reports/r-1")
    with pytest.raises(InvalidInput):
        report_url(base, "r-1", "https://reports.example.com:8443/v1/reports/r-1")


class _Redirect(BaseHTTPRequestHandler):
    target = ""

    def do_GET(self) -> None:
        self.send_response(302)
        self.send_header("Location", self.target)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def redirecting_api(report_api: ReportApiFake) -> Iterator[str]:
    """A 'report API' that redirects every read to the (fake) report API on another port."""
    _Redirect.target = f"{report_api.base_url}/reports/r-1"
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Redirect)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_redirect_from_the_report_api_is_not_followed_and_is_parked(
    world: ReportsWorld, report_api: ReportApiFake, redirecting_api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from relay.wiring import reset_all

    monkeypatch.setenv("REPORT_API_URL", redirecting_api)
    reset_all()
    report_api.publish("r-1", CONTENT)

    response = verify(report_generated("r-1", sha256=SHA))

    assert failed_ids(response) == []
    assert parked_reasons(world) == ["BusinessRejection"]
    assert report_api.calls() == []  # the redirect target was never requested
    assert world.verification("r-1") is None


def test_the_record_is_one_put_that_holds_its_event_and_a_changed_payload_under_its_event_id_is_parked(
    world: ReportsWorld, report_api: ReportApiFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reports.wiring import wiring

    from relay.entity_events import payload_hash

    report_api.publish("r-1", CONTENT)
    env = report_generated("r-1", sha256=SHA)
    verify(env)
    first = world.verification("r-1")
    assert first is not None and first["seen"] == {env.event_id: payload_hash(env)}
    # The same eventId with another payload (a producer bug), even past the early read: not applied.
    monkeypatch.setattr(wiring().verification.store, "get", lambda _report_id: None)
    changed = env.model_copy(update={"payload": {**(env.payload or {}), "url": None, "note": "edited"}})

    response = verify(changed, receive_count=1)

    assert failed_ids(response) == []  # parked, not retried
    assert parked_reasons(world) == ["PayloadConflict"]
    assert world.verification("r-1") == first
