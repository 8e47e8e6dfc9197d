"""Pathological message bodies (deeply nested, huge numbers, lone surrogates, huge bodies) are parked at
once with a reason, never retried until the redrive policy moves them without one."""

from __future__ import annotations

import json
from typing import Any

import pytest

from relay import untrusted_json
from relay.consumer import ConsumerSettings, RecordContext, consume
from relay.envelope import Envelope
from relay.errors import InvalidInput
from relay.parking import park
from tests.builders import FakeContext, envelope, sns_wrapped, sqs_event, sqs_record, string_attribute
from tests.unit.fakes import FakeSqs, message_size

SETTINGS = ConsumerSettings(
    queue_url="https://sqs.us-east-1.amazonaws.com/123456789012/relay-queue",
    dlq_url="https://sqs.us-east-1.amazonaws.com/123456789012/relay-dlq",
)


def envelope_text(payload_json: str) -> str:
    """An envelope whose payload is the given JSON text, spliced in unparsed."""
    wire = json.loads(envelope(payload={"x": 1}).to_json())
    head = json.dumps({k: v for k, v in wire.items() if k != "payload"})
    return head[:-1] + ', "payload": ' + payload_json + "}"


def nested(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


HOSTILE = {
    "100,000 nested [": ("[" * 100_000, "nested deeper than 64"),
    "100,000 nested [ inside SNS": (sns_wrapped("[" * 100_000), "nested deeper than 64"),
    "payload nested 300 deep (parses; pydantic cannot serialise it)": (
        envelope_text(nested(300)),
        "nested deeper than 64",
    ),
    "a 5,000-digit integer": (envelope_text('{"n": ' + "7" * 5000 + "}"), "4300 digits"),
    "NaN": (envelope_text('{"n": NaN}'), "NaN is not a JSON number"),
    "1e999": (envelope_text('{"n": 1e999}'), "out of range"),
    "an escaped lone surrogate": (envelope_text('{"name": "\\ud800"}'), "lone surrogate"),
    "a lone surrogate in a key inside SNS": (sns_wrapped(envelope_text('{"\\udfff": 1}')), "lone surrogate"),
}


@pytest.mark.parametrize("body", [v[0] for v in HOSTILE.values()], ids=list(HOSTILE))
def test_pathological_body_is_parked_at_once_with_a_reason_and_not_retried(body: str) -> None:
    expected = next(reason for text, reason in HOSTILE.values() if text == body)
    calls: list[Envelope] = []
    sqs = FakeSqs()

    response = consume(
        sqs_event([sqs_record(body, message_id="poison")]),
        FakeContext(),
        lambda env, ctx: calls.append(env),
        settings=SETTINGS,
        sqs_client=sqs,
    )

    assert response["batchItemFailures"] == []  # acknowledged: not received again
    assert sqs.visibility == []  # not backed off for a retry
    assert calls == []
    (parked,) = sqs.sent
    assert parked["QueueUrl"] == SETTINGS.dlq_url
    assert parked["MessageBody"] == body  # the original bytes, for a redrive after the fix
    attrs = parked["MessageAttributes"]
    assert attrs["relay.errorClass"]["StringValue"] == "InvalidInput"
    assert expected in attrs["relay.errorMessage"]["StringValue"]
    assert "Parked: fix the producer" in attrs["relay.errorMessage"]["StringValue"]


def test_a_payload_as_deep_as_the_limit_is_delivered() -> None:
    handled: list[Envelope] = []

    def handle(env: Envelope, ctx: RecordContext) -> None:
        handled.append(env)

    body = envelope_text(nested(untrusted_json.MAX_DEPTH - 1))  # the envelope is one more level
    response = consume(
        sqs_event([sqs_record(body)]), FakeContext(), handle, settings=SETTINGS, sqs_client=FakeSqs()
    )
    assert response["batchItemFailures"] == [] and len(handled) == 1


# untrusted_json: each rule, and what it says -----------------------------------------------------


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"a": "\xff"}', "not UTF-8 text (invalid byte 0xff at offset 7)"),
        ("{oops", "not valid JSON (Expecting property name"),
        ("[" * 100_000, "nested deeper than 64 levels"),
        (nested(65), "nested deeper than 64 levels"),
        ("[" * 65 + "]" * 65, "nested deeper than 64 levels"),
        ("1" * 4301, "4300 digits"),
        ("[Infinity]", "Infinity is not a JSON number"),
        ("-1e400", "out of range"),
        ('["\\udc00"]', "lone surrogate (\\udc00)"),
    ],
)
def test_untrusted_json_refuses_what_would_break_later_naming_the_rule(
    data: str | bytes, reason: str
) -> None:
    with pytest.raises(InvalidInput, match="the thing") as info:
        untrusted_json.loads(data, what="the thing")
    assert reason in str(info.value)


def test_untrusted_json_keeps_what_json_allows() -> None:
    text = json.dumps({"emoji": "\U0001f600", "escaped": "\\ud83d\\ude00", "n": [1, 2.5, -0.0, 10**40]})
    assert untrusted_json.loads(text, what="x") == json.loads(text)
    assert untrusted_json.loads('"\\ud83d\\ude00"', what="x") == "\U0001f600"  # a surrogate PAIR is text
    assert untrusted_json.loads(nested(64), what="x") == json.loads(nested(64))
    assert untrusted_json.loads(nested(3), what="x", max_depth=3) == json.loads(nested(3))
    with pytest.raises(InvalidInput):
        untrusted_json.loads(nested(4), what="x", max_depth=3)


def test_untrusted_json_never_echoes_the_input() -> None:
    with pytest.raises(InvalidInput) as info:
        untrusted_json.loads('{"card": "4111111111111111", "n": NaN}', what="body")
    assert "4111" not in str(info.value)


# parking a body near SQS's maximum message size -----------------------------------------------


def test_a_body_that_no_longer_fits_with_every_attribute_is_parked_with_the_reason_alone() -> None:
    limit = 262_144
    original = {f"attr{i}": string_attribute("v" * 100) for i in range(3)}
    body = "x" * (limit - 1_000)  # fitted the source queue with its attributes; not with ours beside them
    record = sqs_record(body, message_id="big", message_attributes=original)
    sqs = FakeSqs(max_message_bytes=limit)

    park(
        record,
        InvalidInput("why " * 500),
        sqs_client=sqs,
        dlq_url="https://dlq",
        source_queue_url="https://q",
    )

    (parked,) = sqs.sent
    assert parked["MessageBody"] == body
    assert set(parked["MessageAttributes"]) == {"relay.errorClass", "relay.errorMessage"}
    assert parked["MessageAttributes"]["relay.errorClass"]["StringValue"] == "InvalidInput"
    assert parked["MessageAttributes"]["relay.errorMessage"]["StringValue"].startswith("why why")
    assert message_size(parked) <= limit


def test_a_message_that_fits_keeps_every_attribute() -> None:
    sqs = FakeSqs(max_message_bytes=262_144)
    record = sqs_record("small", message_attributes={"tenant": string_attribute("acme")})
    park(record, InvalidInput("bad"), sqs_client=sqs, dlq_url="d", source_queue_url="q")
    assert "tenant" in sqs.sent[0]["MessageAttributes"] and len(sqs.sent[0]["MessageAttributes"]) == 7


def test_other_dlq_send_errors_still_raise_so_sqs_keeps_the_message() -> None:
    from botocore.exceptions import ClientError

    class Denied(FakeSqs):
        def send_message(self, **params: Any) -> dict[str, Any]:
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "SendMessage")

    with pytest.raises(ClientError):
        park(sqs_record("b"), InvalidInput("x"), sqs_client=Denied(), dlq_url="d", source_queue_url="q")
