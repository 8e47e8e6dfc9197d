import http.client
import random
import socket
import urllib.error

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from relay.backoff import MAX_VISIBILITY_SECONDS, apply_backoff, backoff_delay
from relay.errors import (
    BusinessRejection,
    DependencyUnavailable,
    InvalidInput,
    OutcomeUnknown,
    PayloadConflict,
    PermanentError,
    TransientError,
    classify,
    classify_http_status,
)
from relay.http import HttpResponse, KeyedApi, transient_network_errors
from relay.parking import park
from tests.builders import binary_attribute, fifo_record, sqs_record, string_attribute
from tests.unit.fakes import FakeSqs


def client_error(code: str, status: int = 400, **extra: object) -> ClientError:
    response = {
        "Error": {"Code": code, "Message": code},
        "ResponseMetadata": {"HTTPStatusCode": status},
        **extra,
    }
    return ClientError(response, "Operation")


@pytest.mark.parametrize(
    "exc",
    [
        client_error("ThrottlingException"),
        client_error("ProvisionedThroughputExceededException"),
        client_error("RequestLimitExceeded"),
        client_error("InternalServerError", 500),
        client_error("Whatever", 503),
        client_error("TransactionConflictException"),
        client_error("TransactionCanceledException", CancellationReasons=[{"Code": "TransactionConflict"}]),
        EndpointConnectionError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com"),
        ReadTimeoutError(endpoint_url="https://x"),
        TimeoutError("socket timed out"),
    ],
)
def test_throttling_timeouts_and_5xx_are_transient(exc: BaseException) -> None:
    error = classify(exc)
    assert isinstance(error, TransientError)
    assert error.__cause__ is exc


def test_validation_client_errors_are_permanent() -> None:
    assert isinstance(classify(client_error("ValidationException")), PermanentError)


def test_unknown_exceptions_are_transient_so_sqs_retries_then_redrives() -> None:
    assert isinstance(classify(KeyError("bug")), TransientError)


def test_relay_errors_classify_as_themselves() -> None:
    conflict = PayloadConflict("x")
    assert classify(conflict) is conflict


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (200, None),
        (202, None),
        (429, DependencyUnavailable),
        (503, DependencyUnavailable),
        (408, DependencyUnavailable),
    ],
)
def test_http_status_classification(status: int, expected: type | None) -> None:
    result = classify_http_status(status, "body")
    assert (type(result) if result is not None else None) is expected


def test_http_4xx_is_a_permanent_rejection_naming_the_status() -> None:
    error = classify_http_status(422, '{"error": "amount must be positive"}', what="legacy payment system")
    assert isinstance(error, BusinessRejection)
    assert "legacy payment system rejected the request with HTTP 422" in str(error)


def test_http_429_keeps_retry_after() -> None:
    error = classify_http_status(429, retry_after=30)
    assert isinstance(error, TransientError) and error.retry_after == 30


@pytest.mark.parametrize(
    "exc",
    [
        TimeoutError("timed out"),
        http.client.RemoteDisconnected("Remote end closed connection without response"),
        ConnectionResetError(104, "Connection reset by peer"),
        http.client.IncompleteRead(b'{"status":', 40),
    ],
    ids=[
        "timeout (socket.timeout is TimeoutError)",
        "remote-disconnected",
        "connection-reset",
        "incomplete-read",
    ],
)
def test_a_failure_after_the_request_was_sent_is_outcome_unknown(exc: BaseException) -> None:
    with pytest.raises(OutcomeUnknown, match="may have taken effect") as raised:
        with transient_network_errors("partner", 5):
            raise exc
    assert isinstance(raised.value, DependencyUnavailable)  # still transient: retried with the same key
    assert raised.value.__cause__ is exc


@pytest.mark.parametrize(
    "exc",
    [
        urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")),
        urllib.error.URLError(socket.gaierror(-2, "Name or service not known")),
        urllib.error.URLError(TimeoutError("timed out")),  # connecting timed out: nothing was sent
        ConnectionRefusedError(111, "Connection refused"),
    ],
    ids=["refused", "dns", "connect-timeout", "refused-unwrapped"],
)
def test_a_request_that_never_left_is_dependency_unavailable_not_outcome_unknown(exc: BaseException) -> None:
    with pytest.raises(DependencyUnavailable, match="partner unreachable") as raised:
        with transient_network_errors("partner", 5):
            raise exc
    assert not isinstance(raised.value, OutcomeUnknown)


def keyed_answer(
    status: int, body: object = None, text: str = "oops", retry_after: float | None = None
) -> None:
    api = KeyedApi("https://partner.example.com", timeout_seconds=5, what="partner")
    response = HttpResponse(status=status, body=body, text=text, retry_after=retry_after)
    api.answer(response, idempotency_key="op-1:payment", not_done="Nothing was charged.")


@pytest.mark.parametrize("status", [500, 502, 504])
def test_keyed_api_500_502_504_are_outcome_unknown_with_the_usual_message_and_retry_after(
    status: int,
) -> None:
    with pytest.raises(OutcomeUnknown) as raised:
        keyed_answer(status, text="gateway trouble", retry_after=12)
    assert str(raised.value) == f"partner answered HTTP {status}: gateway trouble; will retry with backoff."
    assert raised.value.retry_after == 12


@pytest.mark.parametrize("status", [503, 429])
def test_keyed_api_503_and_429_say_not_now_not_maybe_done(status: int) -> None:
    with pytest.raises(DependencyUnavailable) as raised:
        keyed_answer(status)
    assert not isinstance(raised.value, OutcomeUnknown)


def test_keyed_api_still_answers_a_reused_key_and_a_success_as_before() -> None:
    with pytest.raises(PayloadConflict, match="refused Idempotency-Key op-1:payment"):
        keyed_answer(422, body={"error": "IdempotencyKeyReused"})
    api = KeyedApi("https://partner.example.com", timeout_seconds=5, what="partner")
    ok = HttpResponse(status=200, body={"status": "COMPLETED"}, text="", retry_after=None)
    assert api.answer(ok, idempotency_key="k", not_done="") == {"status": "COMPLETED"}


def test_backoff_doubles_per_receive_until_the_cap() -> None:
    delays = [backoff_delay(n, base=2, cap=60, jitter=0.0) for n in range(1, 9)]
    assert delays == [2, 4, 8, 16, 32, 60, 60, 60]


def test_backoff_jitter_is_seeded_and_bounded() -> None:
    assert backoff_delay(4, base=2, cap=900, jitter=random.Random(7)) == backoff_delay(
        4, base=2, cap=900, jitter=random.Random(7)
    )
    draws = {backoff_delay(4, base=2, cap=900, jitter=random.Random(seed)) for seed in range(50)}
    assert min(draws) >= 16 and max(draws) <= 20  # 16 s + up to 25 %
    assert len(draws) > 1


def test_backoff_is_clamped_to_the_sqs_visibility_limit() -> None:
    assert backoff_delay(10_000, base=2, cap=10**9, jitter=0.0) == MAX_VISIBILITY_SECONDS
    assert backoff_delay(0, base=2, cap=60, jitter=-100.0) == 0


def test_backoff_never_earlier_than_retry_after() -> None:
    assert backoff_delay(1, base=2, cap=900, jitter=0.0, retry_after=45) == 45


def test_apply_backoff_sets_visibility_from_receive_count() -> None:
    sqs = FakeSqs()
    record = sqs_record("{}", receive_count=3, receipt_handle="rh-3")
    delay = apply_backoff(record, sqs_client=sqs, queue_url="https://q", base=2, cap=900, jitter=0.0)
    assert delay == 8
    assert sqs.visibility == [{"QueueUrl": "https://q", "ReceiptHandle": "rh-3", "VisibilityTimeout": 8}]


def test_apply_backoff_sets_a_delay_decided_before_instead_of_drawing_one() -> None:
    sqs = FakeSqs()
    record = sqs_record("{}", receive_count=3, receipt_handle="rh-3")
    delay = apply_backoff(record, sqs_client=sqs, queue_url="https://q", base=2, cap=900, delay=500)
    assert delay == 500
    assert sqs.visibility[0]["VisibilityTimeout"] == 500


def test_park_sends_original_body_and_attributes_with_the_reason() -> None:
    sqs = FakeSqs()
    record = sqs_record(
        "original body",
        message_id="m-1",
        receive_count=2,
        message_attributes={"tenant": string_attribute("acme"), "blob": binary_attribute(b"\x00\x01")},
    )
    park(
        record, InvalidInput("x" * 5000), sqs_client=sqs, dlq_url="https://dlq", source_queue_url="https://q"
    )
    (sent,) = sqs.sent
    attrs = sent["MessageAttributes"]
    assert sent["MessageBody"] == "original body"
    assert attrs["relay.errorClass"]["StringValue"] == "InvalidInput"
    assert len(attrs["relay.errorMessage"]["StringValue"]) <= 1000
    assert attrs["relay.originalMessageId"]["StringValue"] == "m-1"
    assert attrs["relay.receiveCount"]["StringValue"] == "2"
    assert attrs["relay.sourceQueue"]["StringValue"] == "https://q"
    assert attrs["relay.firstFailureAt"]["StringValue"].endswith("Z")
    assert attrs["tenant"] == {"DataType": "String", "StringValue": "acme"}
    assert attrs["blob"] == {"DataType": "Binary", "BinaryValue": b"\x00\x01"}
    assert "MessageGroupId" not in sent


def test_park_respects_the_ten_attribute_limit_and_keeps_first_failure_time() -> None:
    sqs = FakeSqs()
    original = {f"a{i}": string_attribute(str(i)) for i in range(9)}
    original["relay.firstFailureAt"] = string_attribute("2024-01-01T00:00:00Z")
    park(
        sqs_record("b", message_attributes=original),
        InvalidInput("x"),
        sqs_client=sqs,
        dlq_url="d",
        source_queue_url="q",
    )
    attrs = sqs.sent[0]["MessageAttributes"]
    assert len(attrs) == 10
    assert attrs["relay.firstFailureAt"]["StringValue"] == "2024-01-01T00:00:00Z"


def test_park_to_a_fifo_dlq_keeps_the_group_and_dedupes_on_message_id() -> None:
    sqs = FakeSqs()
    record = fifo_record("b", group_id="op-7", message_id="m-9")
    park(record, InvalidInput("x"), sqs_client=sqs, dlq_url="https://dlq.fifo", source_queue_url="q")
    assert sqs.sent[0]["MessageGroupId"] == "op-7"
    assert sqs.sent[0]["MessageDeduplicationId"] == "m-9"


def test_park_raises_when_the_dlq_send_fails() -> None:
    with pytest.raises(ConnectionError):
        park(
            sqs_record("b"),
            InvalidInput("x"),
            sqs_client=FakeSqs(fail_send=True),
            dlq_url="d",
            source_queue_url="q",
        )
