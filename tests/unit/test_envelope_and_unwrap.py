import json
from datetime import UTC, datetime, timedelta

import pytest

from relay.envelope import (
    ClaimCheckRef,
    Envelope,
    build_event_id,
    canonical_payload_sha256,
    new_envelope,
)
from relay.errors import InvalidInput, PermanentError, UnknownVersion
from relay.unwrap import envelope_from_sqs_record
from tests.builders import envelope, eventbridge_wrapped, sns_wrapped, sqs_record


def test_event_id_is_deterministic_from_business_identity() -> None:
    first = new_envelope(
        "PaymentRequested", identity=["op-1"], ids={"operationId": "op-1"}, payload={}, correlation_id="a"
    )
    again = new_envelope(
        "PaymentRequested", identity=["op-1"], ids={"operationId": "op-1"}, payload={}, correlation_id="b"
    )
    other_step = new_envelope(
        "PaymentCompleted", identity=["op-1"], ids={"operationId": "op-1"}, payload={}, correlation_id="a"
    )
    assert first.event_id == again.event_id
    assert first.event_id != other_step.event_id


def test_event_id_parts_cannot_collide_by_concatenation() -> None:
    assert build_event_id("a:b", "c") != build_event_id("a", "b:c")


def test_envelope_round_trips_with_camel_case_on_the_wire() -> None:
    original = envelope(payload={"amount": 10})
    wire = json.loads(original.to_json())
    assert {"eventId", "eventType", "eventVersion", "occurredAt", "correlationId", "ids", "payload"} <= set(
        wire
    )
    assert Envelope.from_json(original.to_json()) == original


def test_republished_fact_with_new_timestamp_hashes_equal() -> None:
    first = envelope(ids={"operationId": "op-1"}, payload={"b": 1, "a": 2})
    later = first.model_copy(
        update={"occurred_at": first.occurred_at + timedelta(hours=1), "correlation_id": "x"}
    )
    reordered = Envelope.from_dict({**json.loads(first.to_json()), "payload": {"a": 2, "b": 1}})
    assert (
        canonical_payload_sha256(first)
        == canonical_payload_sha256(later)
        == canonical_payload_sha256(reordered)
    )
    changed = first.model_copy(update={"payload": {"b": 1, "a": 3}})
    assert canonical_payload_sha256(changed) != canonical_payload_sha256(first)


def test_exactly_one_of_payload_and_claim_check() -> None:
    ref = ClaimCheckRef(bucket="b", key="k", sha256="0" * 64, size=1)
    with pytest.raises(InvalidInput, match="exactly one of payload and claimCheck"):
        Envelope.from_dict({**json.loads(envelope().to_json()), "claimCheck": ref.model_dump(by_alias=True)})


def test_unknown_major_version_is_permanent_and_names_supported_versions() -> None:
    wire = {**json.loads(envelope().to_json()), "eventVersion": "2.0"}
    with pytest.raises(
        UnknownVersion, match=r"eventVersion 2\.0 is not supported \(supported: 1\.x\)"
    ) as info:
        Envelope.from_dict(wire)
    assert isinstance(info.value, PermanentError)


def test_new_minor_version_with_extra_fields_is_accepted() -> None:
    wire = {**json.loads(envelope().to_json()), "eventVersion": "1.7", "newField": "x"}
    assert Envelope.from_dict(wire).event_version == "1.7"


def test_occurred_at_must_be_timezone_aware() -> None:
    wire = {**json.loads(envelope().to_json()), "occurredAt": "2024-01-01T00:00:00"}
    with pytest.raises(InvalidInput, match="occurredAt"):
        Envelope.from_dict(wire)


@pytest.mark.parametrize(
    "body_of",
    [
        pytest.param(lambda env: sns_wrapped(env), id="sns-notification"),
        pytest.param(lambda env: env.to_json(), id="sns-raw-or-direct"),
        pytest.param(lambda env: eventbridge_wrapped(env), id="eventbridge-with-envelope-detail"),
    ],
)
def test_every_route_unwraps_to_the_same_envelope(body_of) -> None:  # type: ignore[no-untyped-def]
    env = envelope(payload={"amount": 5})
    assert envelope_from_sqs_record(sqs_record(body_of(env))) == env


def test_plain_eventbridge_detail_becomes_a_deterministic_envelope() -> None:
    body = eventbridge_wrapped(
        {"snapshotHour": "2024-05-01T10"}, event_id="eb-1", time_="2024-05-01T10:00:00Z"
    )
    first = envelope_from_sqs_record(sqs_record(body))
    again = envelope_from_sqs_record(sqs_record(body))
    assert first.event_type == "ScoreSnapshotDue"
    assert first.payload == {"snapshotHour": "2024-05-01T10"}
    assert first.occurred_at == datetime(2024, 5, 1, 10, tzinfo=UTC)
    assert first.event_id == again.event_id
    other = eventbridge_wrapped({"snapshotHour": "2024-05-01T10"}, event_id="eb-2")
    assert envelope_from_sqs_record(sqs_record(other)).event_id != first.event_id


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("{not json", "is not valid JSON"),
        ('{"hello": "world"}', "not a Relay envelope"),
        ("[1, 2]", "not a Relay envelope"),
        (sns_wrapped("not json either"), "SNS notification Message is not valid JSON"),
        (sns_wrapped({"eventId": "e", "eventType": "X"}), "eventVersion: Field required"),
    ],
)
def test_malformed_bodies_are_invalid_input_with_a_clear_message(body: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message) as info:
        envelope_from_sqs_record(sqs_record(body, message_id="m-1"))
    assert "m-1" in str(info.value)


def test_validation_messages_do_not_echo_payload_values() -> None:
    wire = {**json.loads(envelope().to_json()), "occurredAt": "secret-card-4111"}
    with pytest.raises(InvalidInput) as info:
        Envelope.from_dict(wire)
    assert "4111" not in str(info.value)
