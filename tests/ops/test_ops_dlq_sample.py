"""ops dlq sample: a warning first, the reasons and identities shown, the body redacted, nothing kept."""

from __future__ import annotations

import json
import sys

import pytest

from ops.__main__ import main
from ops.app import App
from ops.parked import Received, body_shape, read_parked
from relay.errors import UnknownVersion
from tests.builders import envelope
from tests.ops.world import park, receive_all


def _dlq_url(app: App) -> str:
    return app.find_queue("payments-payment-requests-dlq", dlq=True).url


def test_sample_warns_first_shows_why_and_what_and_redacts_the_body(
    payments: App, capsys: pytest.CaptureFixture[str]
) -> None:
    event = envelope(
        "PaymentRequested",
        ids={"operationId": "op-4711", "paymentId": "pay-9"},
        payload={"amount": "12.50", "payer": "acct-secret-payer"},
        correlation_id="corr-42",
    )
    park(payments, "payments-payment-requests", event=event)

    assert main(["dlq", "sample", "payment-requests-dlq", "--yes"]) == 0

    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("WARNING: sampling RECEIVES")
    assert "receive count goes up" in first and "hidden from every other reader for up to 30 s" in first
    assert "no RedrivePolicy of its own" in first
    for shown in (
        "errorClass         InvalidInput",
        "errorMessage       amount: Input should be a valid decimal",
        "sourceQueue        payments-payment-requests",
        "originalMessageId",
        "firstFailureAt",
        "eventType          PaymentRequested",
        f"eventId            {event.event_id}",
        "operationId=op-4711, paymentId=pay-9",
        "correlationId      corr-42",
        "SNS notification (topic payment-events)",
        "REDACTED",
    ):
        assert shown in out, shown
    assert "payer" in out and "amount" in out  # field names
    assert "acct-secret-payer" not in out and "12.50" not in out  # never values
    # Given back at once: visible again, its receive count raised by the sample's one receive.
    (message,) = receive_all(payments, _dlq_url(payments))
    assert message["Attributes"]["ApproximateReceiveCount"] == "2"


def test_show_body_prints_it(payments: App, capsys: pytest.CaptureFixture[str]) -> None:
    park(payments, "payments-payment-requests")

    assert main(["dlq", "sample", "payments-payment-requests-dlq", "--yes", "--show-body", "--json"]) == 0

    captured = capsys.readouterr()
    assert captured.err.startswith("WARNING")  # the JSON stays alone on stdout
    (message,) = json.loads(captured.out)["messages"]
    assert "acct-secret-payer" in message["body"]
    assert message["reasons"]["errorClass"] == "InvalidInput" and message["eventType"] == "PaymentRequested"


def test_without_yes_and_without_a_terminal_nothing_is_received(
    payments: App, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    park(payments, "payments-payment-requests")
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False)

    assert main(["dlq", "sample", "payment-requests-dlq"]) == 2

    captured = capsys.readouterr()
    assert captured.out.startswith("WARNING") and "--yes" in captured.err
    (message,) = receive_all(payments, _dlq_url(payments))
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"


def test_a_queue_with_its_own_redrive_policy_is_refused_unless_forced(
    payments: App, capsys: pytest.CaptureFixture[str]
) -> None:
    park(payments, "payments-payment-requests")
    dlq = payments.find_queue("payment-requests-dlq", dlq=True)
    other = payments.find_queue("sweeps-dlq", dlq=True)
    payments.client("sqs").set_queue_attributes(
        QueueUrl=dlq.url,
        Attributes={"RedrivePolicy": json.dumps({"deadLetterTargetArn": other.arn, "maxReceiveCount": 2})},
    )

    assert main(["dlq", "sample", "payment-requests-dlq", "--yes"]) == 2
    assert "has a RedrivePolicy of its own" in capsys.readouterr().err
    assert main(["dlq", "sample", "payment-requests-dlq", "--yes", "--force"]) == 0
    assert "The queue HAS a RedrivePolicy" in capsys.readouterr().out


def test_an_ambiguous_name_lists_the_candidates(payments: App, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dlq", "sample", "requests-dlq", "--yes"]) == 2

    err = capsys.readouterr().err
    assert "payments-payment-requests-dlq" in err and "payments-invoice-requests-dlq" in err


def _received(body: str, **attributes: str) -> Received:
    return Received(
        message_id="m-1",
        receipt_handle="rh",
        body=body,
        attributes={"ApproximateReceiveCount": "1"},
        message_attributes={k: {"DataType": "String", "StringValue": v} for k, v in attributes.items()},
    )


def test_a_body_the_kernel_refuses_still_shows_what_it_can_and_why(monkeypatch: pytest.MonkeyPatch) -> None:
    future = {**envelope("PaymentRequested", ids={"operationId": "op-1"}).to_dict(), "eventVersion": "2.0"}
    parked = read_parked(_received(json.dumps(future), **{"relay.errorClass": UnknownVersion.__name__}))
    assert parked.event_type == "PaymentRequested" and parked.ids == {"operationId": "op-1"}
    assert parked.problem is not None and "eventVersion 2.0 is not supported" in parked.problem

    not_json = read_parked(_received("{not json"))
    assert not_json.route == "unreadable" and not_json.shape == "<9 bytes, not JSON>"
    assert not_json.error_class.startswith("(no reason")

    # Without the kernel on the path (python -m ops from a bare checkout): the same routes, by hand.
    monkeypatch.setitem(sys.modules, "relay.unwrap", None)
    plain = read_parked(_received(json.dumps(envelope("OrderCreated", ids={"orderId": "o-1"}).to_dict())))
    assert (plain.event_type, plain.ids, plain.route, plain.problem) == (
        "OrderCreated",
        {"orderId": "o-1"},
        "envelope",
        None,
    )


def test_the_body_shape_names_fields_through_the_sns_wrapping_never_values() -> None:
    body = json.dumps(
        {
            "Type": "Notification",
            "TopicArn": "arn:x",
            "Message": json.dumps({"eventId": "e", "payload": {"card": "4111-1111", "lines": [1, 2]}}),
        }
    )
    shape = body_shape(body)
    assert shape == "{Type, TopicArn, Message: {eventId, payload: {card, lines}}}"
    assert "4111" not in shape


def test_dead_letters_of_eventbridge_and_stream_failure_records_are_shown_for_what_they_are() -> None:
    dead_letter = read_parked(
        _received(
            json.dumps({"snapshotHour": "2026-11-29T10:00:00Z"}),
            ERROR_CODE="HTTP_403",
            ERROR_MESSAGE="Forbidden",
            RULE_ARN="arn:aws:events:us-east-1:123456789012:rule/relay-dev-scores-hourly-snapshot",
        )
    )
    assert dead_letter.error_class == "HTTP_403" and dead_letter.reasons["ERROR_MESSAGE"] == "Forbidden"

    failure = {
        "requestContext": {"requestId": "r", "condition": "RetryAttemptsExhausted"},
        "responseContext": {"statusCode": 200},
        "DDBStreamBatchInfo": {"shardId": "s", "startSequenceNumber": "1", "batchSize": 3},
    }
    record = read_parked(_received(json.dumps(failure)))
    assert record.route.startswith("Lambda on-failure record") and record.problem is None
    assert record.error_class == "(a stream batch)"
    assert "DDBStreamBatchInfo: {shardId, startSequenceNumber, batchSize}" in record.shape
