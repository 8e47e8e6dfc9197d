"""Outbox publisher, claim check and external side effects against moto."""

from __future__ import annotations

import json
from typing import Any

import pytest

from relay.claim_check import get_bytes, get_json, put_bytes, put_json
from relay.envelope import Envelope
from relay.errors import ClaimCheckMismatch, PayloadConflict
from relay.outbox import publish_outbox_batch
from relay.side_effects import record_id, run_once
from relay.unwrap import envelope_from_sqs_record
from tests.builders import ddb_stream_event, ddb_stream_record, envelope, item_insert, record_from_received
from tests.handlers.moto_env import Aws


def topic_with_queue(aws: Aws) -> str:
    topic_arn: str = aws.sns.create_topic(Name="payment-events")["TopicArn"]
    aws.sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=aws.queue_arn)
    return topic_arn


def received(aws: Aws) -> list[dict[str, Any]]:
    return list(
        aws.sqs.receive_message(QueueUrl=aws.queue_url, MaxNumberOfMessages=10, AttributeNames=["All"]).get(
            "Messages", []
        )
    )


def test_an_items_event_is_published_with_the_event_type_attribute(aws: Aws) -> None:
    topic_arn = topic_with_queue(aws)
    env = envelope("PaymentRequested", ids={"operationId": "op-1"}, payload={"amount": 5})
    response = publish_outbox_batch(
        ddb_stream_event([item_insert(env, table=aws.table)]),
        topic_arn=topic_arn,
        sns_client=aws.sns,
        ddb_client=aws.ddb,
    )
    assert response == {"batchItemFailures": []}
    (message,) = received(aws)
    notification = json.loads(message["Body"])
    assert notification["MessageAttributes"]["eventType"] == {"Type": "String", "Value": "PaymentRequested"}
    assert notification["MessageAttributes"]["correlationId"]["Value"] == env.correlation_id
    # The consumer side unwraps it back into the very same envelope.
    assert envelope_from_sqs_record(record_from_received(message, aws.queue_arn)) == env


def test_records_that_add_no_event_are_ignored(aws: Aws) -> None:
    """A write that leaves ``ev`` as it was (its OLD image holds the same events), an item without
    events, and a row of the layout before one write per step (``ops migrate`` publishes those)."""
    published: list[Envelope] = []
    env = envelope()
    again = item_insert(env) | {"eventName": "MODIFY"}
    again["dynamodb"]["OldImage"] = again["dynamodb"]["NewImage"]
    other = ddb_stream_record(
        "INSERT", keys={"id": {"S": "operation#1"}}, new_image={"id": {"S": "operation#1"}}
    )
    row = ddb_stream_record(
        "INSERT",
        keys={"id": {"S": f"outbox#{env.event_id}"}},
        new_image={"kind": {"S": "outbox"}, "envelope": {"S": env.to_json()}},
    )
    response = publish_outbox_batch(
        ddb_stream_event([again, other, row]), publish=published.append, ddb_client=aws.ddb
    )
    assert response == {"batchItemFailures": []} and published == []


def test_publish_failure_reports_its_sequence_number_and_every_later_one(aws: Aws) -> None:
    envs = [envelope(payload={"n": n}) for n in range(4)]
    records = [item_insert(e, table=aws.table) for e in envs]
    published: list[Envelope] = []

    def publish(env: Envelope) -> None:
        if env.payload == {"n": 1}:
            raise TimeoutError("SNS timed out")
        published.append(env)

    response = publish_outbox_batch(ddb_stream_event(records), publish=publish, ddb_client=aws.ddb)
    expected = [r["dynamodb"]["SequenceNumber"] for r in records[1:]]
    assert [f["itemIdentifier"] for f in response["batchItemFailures"]] == expected
    assert published == [envs[0]]  # later events wait for the retry, in order


def test_claim_check_round_trip_verifies_sha256_and_size(aws: Aws) -> None:
    aws.s3.create_bucket(Bucket="claims")
    ref = put_json(
        {"amount": 5, "note": "ü"}, bucket="claims", key="payments/op-1/request.json", s3_client=aws.s3
    )
    assert ref.size > 0 and len(ref.sha256) == 64
    assert get_json(ref, s3_client=aws.s3) == {"amount": 5, "note": "ü"}


def test_claim_check_detects_a_tampered_object(aws: Aws) -> None:
    aws.s3.create_bucket(Bucket="claims")
    ref = put_bytes(b"original", bucket="claims", key="k", s3_client=aws.s3)
    aws.s3.put_object(Bucket="claims", Key="k", Body=b"replaced")
    with pytest.raises(ClaimCheckMismatch, match=r"s3://claims/k does not match its reference"):
        get_bytes(ref, s3_client=aws.s3)


def test_claim_check_missing_object_is_permanent(aws: Aws) -> None:
    aws.s3.create_bucket(Bucket="claims")
    ref = put_bytes(b"x", bucket="claims", key="k", s3_client=aws.s3)
    aws.s3.delete_object(Bucket="claims", Key="k")
    with pytest.raises(ClaimCheckMismatch, match="does not exist"):
        get_bytes(ref, s3_client=aws.s3)


def test_side_effect_runs_once_and_always_gets_the_downstream_key(aws: Aws) -> None:
    calls: list[str] = []

    def charge(key: str) -> dict[str, Any]:
        calls.append(key)
        return {"paymentId": "pay-1"}

    for _ in range(2):
        result = run_once(
            "legacy-payment",
            downstream_key="op-1:payment",
            payload={"amount": 5},
            call=charge,
            table_name=aws.table,
            ddb_client=aws.ddb,
        )
        assert result == {"paymentId": "pay-1"}
    assert calls == ["op-1:payment"]


def test_record_id_names_the_record_powertools_writes_for_a_side_effect(aws: Aws) -> None:
    run_once(
        "legacy-payment",
        downstream_key="op-9:payment",
        payload={"amount": 5},
        call=lambda key: {"ok": True},
        table_name=aws.table,
        ddb_client=aws.ddb,
    )
    items = aws.ddb.scan(TableName=aws.table)["Items"]
    assert [item["id"]["S"] for item in items] == [record_id("legacy-payment", "op-9:payment")]
    assert items[0]["status"]["S"] == "COMPLETED"
    assert record_id("legacy-payment", "op-9:payment") != record_id("legacy-payment", "op-8:payment")


def test_side_effect_with_a_different_payload_is_a_payload_conflict(aws: Aws) -> None:
    def charge(key: str) -> dict[str, Any]:
        return {"ok": True}

    common = {
        "downstream_key": "op-2:payment",
        "call": charge,
        "table_name": aws.table,
        "ddb_client": aws.ddb,
    }
    run_once("legacy-payment", payload={"amount": 5}, **common)
    with pytest.raises(PayloadConflict, match="op-2:payment was already run with a different payload"):
        run_once("legacy-payment", payload={"amount": 6}, **common)


def test_failed_side_effect_is_not_remembered(aws: Aws) -> None:
    attempts: list[str] = []

    def flaky(key: str) -> dict[str, Any]:
        attempts.append(key)
        if len(attempts) == 1:
            raise TimeoutError("legacy system timed out")
        return {"ok": True}

    kwargs: dict[str, Any] = {"downstream_key": "op-3:payment", "payload": {}, "call": flaky}
    with pytest.raises(TimeoutError):
        run_once("legacy-payment", table_name=aws.table, ddb_client=aws.ddb, **kwargs)
    assert run_once("legacy-payment", table_name=aws.table, ddb_client=aws.ddb, **kwargs) == {"ok": True}
    assert len(attempts) == 2


def test_registered_lambda_context_bounds_the_in_progress_record(aws: Aws) -> None:
    import warnings

    from relay import side_effects
    from tests.builders import FakeContext

    side_effects.register_lambda_context(FakeContext())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # Powertools warns when it cannot see the remaining time
            run_once(
                "invoice",
                downstream_key="op-4:invoice",
                payload={},
                call=lambda key: {"invoiceId": key},
                table_name=aws.table,
                ddb_client=aws.ddb,
            )
    finally:
        side_effects.register_lambda_context(None)
    record = aws.ddb.scan(TableName=aws.table)["Items"][0]
    assert record["id"]["S"].startswith("side-effect#invoice#")
    assert "expiresAt" in record
