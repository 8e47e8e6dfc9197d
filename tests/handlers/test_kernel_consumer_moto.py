"""A kernel consumer end to end on moto: SNS -> SQS (redrive policy) -> consume -> DynamoDB txn."""

from __future__ import annotations

import dataclasses
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from relay.consumer import ConsumerSettings, RecordContext, consume
from relay.ddb import apply_write, apply_writes, put, update
from relay.envelope import Envelope
from relay.errors import BusinessRejection, DependencyUnavailable, PermanentError
from relay.idempotency import CommitResult, commit_once, marker_id
from tests.builders import FakeContext, envelope, record_from_received, sns_wrapped, sqs_record
from tests.handlers.moto_env import Aws


class IllegalTransition(BusinessRejection):
    pass


def account_handler(aws: Aws, results: list[CommitResult]) -> Any:
    """A typical consumer: add the payload amount to an account, once per event."""

    def handle(env: Envelope, ctx: RecordContext) -> None:
        assert env.payload is not None
        write = update(
            aws.table,
            {"id": f"account#{env.ids['accountId']}"},
            "SET balance = if_not_exists(balance, :zero) + :amount",
            values={":zero": 0, ":amount": env.payload["amount"]},
        )
        results.append(commit_once(env, [write], table_name=aws.table, ddb_client=aws.ddb))

    return handle


def status_change(aws: Aws, item_id: str, source: str, target: str, explain: Any) -> Any:
    """``status: source -> target`` on item ``item_id``; a failed condition raises ``explain(old)``."""
    return update(
        aws.table,
        {"id": item_id},
        "SET #s = :to",
        condition="#s = :from",
        names={"#s": "status"},
        values={":from": source, ":to": target},
        on_condition_failed=explain,
    )


def deliver(
    aws: Aws, handle: Any, *, visibility_timeout: int | None = None, settings: ConsumerSettings | None = None
) -> dict[str, Any]:
    """What the Lambda event source mapping does: receive, invoke, delete what was not reported failed."""
    params: dict[str, Any] = {
        "QueueUrl": aws.queue_url,
        "MaxNumberOfMessages": 10,
        "AttributeNames": ["All"],
        "MessageAttributeNames": ["All"],
    }
    if visibility_timeout is not None:
        params["VisibilityTimeout"] = visibility_timeout
    messages = aws.sqs.receive_message(**params).get("Messages", [])
    event = {"Records": [record_from_received(m, aws.queue_arn) for m in messages]}
    response = consume(event, FakeContext(), handle, settings=settings or aws.settings, sqs_client=aws.sqs)
    failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    for m in messages:
        if m["MessageId"] not in failed:
            aws.sqs.delete_message(QueueUrl=aws.queue_url, ReceiptHandle=m["ReceiptHandle"])
    return response


def subscribe_queue(aws: Aws, *, raw: bool) -> str:
    topic_arn: str = aws.sns.create_topic(Name="payment-events")["TopicArn"]
    aws.sns.subscribe(
        TopicArn=topic_arn,
        Protocol="sqs",
        Endpoint=aws.queue_arn,
        Attributes={"RawMessageDelivery": "true" if raw else "false"},
    )
    return topic_arn


def balance(aws: Aws, account: str) -> int | None:
    item = aws.item(f"account#{account}")
    return int(item["balance"]["N"]) if item else None


@pytest.mark.parametrize("raw", [False, True], ids=["sns-notification", "sns-raw-delivery"])
def test_sns_delivered_event_is_applied_once_even_when_delivered_twice(aws: Aws, raw: bool) -> None:
    topic_arn = subscribe_queue(aws, raw=raw)
    env = envelope("PaymentCompleted", ids={"accountId": "a1"}, identity=["op-1"], payload={"amount": 7})
    for _ in range(2):  # SNS and SQS are at-least-once: the same event arrives twice
        aws.sns.publish(TopicArn=topic_arn, Message=env.to_json())
    results: list[CommitResult] = []
    response = deliver(aws, account_handler(aws, results))
    assert response == {"batchItemFailures": []}
    assert sorted(r.value for r in results) == ["APPLIED", "DUPLICATE"]
    assert balance(aws, "a1") == 7
    assert aws.queue_depth() == 0


def test_exactly_one_dynamodb_request_per_new_and_per_duplicate_record(aws: Aws) -> None:
    env = envelope(ids={"accountId": "a1"}, identity=["op-1"], payload={"amount": 1})
    results: list[CommitResult] = []
    handle = account_handler(aws, results)
    consume({"Records": [sqs_record(env)]}, FakeContext(), handle, settings=aws.settings, sqs_client=aws.sqs)
    assert aws.ddb_requests == ["DynamoDB_20120810.TransactWriteItems"]
    aws.ddb_requests.clear()
    consume({"Records": [sqs_record(env)]}, FakeContext(), handle, settings=aws.settings, sqs_client=aws.sqs)
    assert aws.ddb_requests == ["DynamoDB_20120810.TransactWriteItems"]
    assert [r.value for r in results] == ["APPLIED", "DUPLICATE"]


def test_same_event_id_with_a_different_payload_is_parked_as_payload_conflict(aws: Aws) -> None:
    original = envelope(ids={"accountId": "a1"}, identity=["op-1"], payload={"amount": 7})
    tampered = original.model_copy(update={"payload": {"amount": 700}})
    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=original.to_json())
    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=tampered.to_json())
    results: list[CommitResult] = []
    assert deliver(aws, account_handler(aws, results)) == {"batchItemFailures": []}
    assert balance(aws, "a1") == 7
    (parked,) = aws.dlq_messages()
    attrs = parked["MessageAttributes"]
    assert attrs["relay.errorClass"]["StringValue"] == "PayloadConflict"
    assert (
        f"event {original.event_id} was already processed with a different payload"
        in (attrs["relay.errorMessage"]["StringValue"])
    )
    assert json.loads(parked["Body"])["payload"] == {"amount": 700}


def test_malformed_json_is_parked_in_the_dlq_with_the_reason(aws: Aws) -> None:
    aws.sqs.send_message(
        QueueUrl=aws.queue_url,
        MessageBody="{not json",
        MessageAttributes={"tenant": {"DataType": "String", "StringValue": "acme"}},
    )
    response = deliver(aws, account_handler(aws, []))
    assert response == {"batchItemFailures": []}
    assert aws.queue_depth() == 0
    (parked,) = aws.dlq_messages()
    attrs = parked["MessageAttributes"]
    assert parked["Body"] == "{not json"
    assert attrs["relay.errorClass"]["StringValue"] == "InvalidInput"
    assert "not valid JSON" in attrs["relay.errorMessage"]["StringValue"]
    assert attrs["relay.sourceQueue"]["StringValue"] == aws.queue_url
    assert attrs["relay.receiveCount"]["StringValue"] == "1"
    assert attrs["tenant"]["StringValue"] == "acme"


def test_unknown_event_version_is_parked_naming_supported_versions(aws: Aws) -> None:
    wire = json.loads(envelope(ids={"accountId": "a1"}).to_json())
    wire["eventVersion"] = "2.0"
    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=sns_wrapped(wire))
    assert deliver(aws, account_handler(aws, [])) == {"batchItemFailures": []}
    (parked,) = aws.dlq_messages()
    assert parked["MessageAttributes"]["relay.errorClass"]["StringValue"] == "UnknownVersion"
    assert "supported: 1.x" in parked["MessageAttributes"]["relay.errorMessage"]["StringValue"]


def test_failed_business_condition_writes_no_marker_and_raises_the_callers_error(aws: Aws) -> None:
    aws.ddb.put_item(TableName=aws.table, Item={"id": {"S": "operation#op-1"}, "status": {"S": "COMPLETED"}})
    env = envelope("PaymentCompleted", ids={"operationId": "op-1"}, identity=["op-1"], payload={})
    write = status_change(
        aws,
        "operation#op-1",
        "PAYMENT_PROCESSING",
        "PAYMENT_COMPLETED",
        lambda old: IllegalTransition(
            f"operation op-1 is {old['status'] if old else 'missing'}, cannot complete payment"
        ),
    )
    with pytest.raises(IllegalTransition, match="operation op-1 is COMPLETED"):
        commit_once(env, [write], table_name=aws.table, ddb_client=aws.ddb)
    assert aws.item(marker_id(env.event_id)) is None
    assert aws.item("operation#op-1")["status"]["S"] == "COMPLETED"  # type: ignore[index]


def test_marker_records_hash_type_and_ttl(aws: Aws) -> None:
    env = envelope(ids={"accountId": "a1"}, payload={"amount": 1})
    commit_once(env, [], table_name=aws.table, ddb_client=aws.ddb, ttl_seconds=3600)
    marker = aws.item(marker_id(env.event_id))
    assert marker is not None
    assert marker["kind"]["S"] == "processed-event"
    assert marker["eventType"]["S"] == env.event_type
    assert len(marker["payloadSha256"]["S"]) == 64
    assert int(marker["expiresAt"]["N"]) > 0


def test_parking_failure_keeps_the_message_in_the_queue(aws: Aws) -> None:
    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody="{not json")
    aws.sqs.delete_queue(QueueUrl=aws.dlq_url)  # the DLQ is gone: parking must fail
    response = deliver(aws, account_handler(aws, []))
    assert len(response["batchItemFailures"]) == 1
    assert aws.queue_depth() == 1


def test_transient_failure_backs_off_the_message_visibility(aws: Aws) -> None:
    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=envelope(ids={"accountId": "a1"}).to_json())

    def sick_dependency(env: Envelope, ctx: RecordContext) -> None:
        raise TimeoutError("payment system did not answer")

    # Received with visibility 0, so only our ChangeMessageVisibility can hide it again.
    response = deliver(aws, sick_dependency, visibility_timeout=0)
    assert len(response["batchItemFailures"]) == 1
    assert aws.sqs.receive_message(QueueUrl=aws.queue_url).get("Messages") is None
    assert aws.queue_depth() == 1


def test_duplicate_of_a_state_transition_is_a_duplicate_not_an_illegal_transition(aws: Aws) -> None:
    aws.ddb.put_item(TableName=aws.table, Item={"id": {"S": "operation#op-1"}, "status": {"S": "PENDING"}})
    env = envelope("PaymentStarted", ids={"operationId": "op-1"}, identity=["op-1"], payload={})

    def transition() -> Any:
        return status_change(
            aws,
            "operation#op-1",
            "PENDING",
            "PAYMENT_PROCESSING",
            lambda old: IllegalTransition(f"operation op-1 is {old}"),
        )

    assert commit_once(env, [transition()], table_name=aws.table, ddb_client=aws.ddb) is CommitResult.APPLIED
    # Redelivery: the business condition now fails too, but the marker explains why.
    assert (
        commit_once(env, [transition()], table_name=aws.table, ddb_client=aws.ddb) is CommitResult.DUPLICATE
    )


def test_apply_writes_commits_all_or_nothing_and_explains_a_failed_condition(aws: Aws) -> None:
    aws.ddb.put_item(TableName=aws.table, Item={"id": {"S": "order#o-1"}, "status": {"S": "PAID"}})
    created = put(aws.table, {"id": "order#o-2", "status": "CREATED"}, "attribute_not_exists(id)")
    cancel = status_change(
        aws,
        "order#o-1",
        "CREATED",
        "CANCELLED",
        lambda old: IllegalTransition(f"order o-1 is {old['status'] if old else 'gone'}"),
    )
    with pytest.raises(IllegalTransition, match="order o-1 is PAID"):
        apply_writes([created, cancel], ddb_client=aws.ddb)
    assert aws.item("order#o-2") is None  # the other write was not applied either
    apply_writes([created], ddb_client=aws.ddb)
    assert aws.item("order#o-2")["status"]["S"] == "CREATED"  # type: ignore[index]
    # A failed condition without an explanation is classified by the kernel (permanent: resending the
    # same transaction cannot succeed).
    with pytest.raises(PermanentError, match="ConditionalCheckFailed"):
        apply_writes([created], ddb_client=aws.ddb)


def test_apply_write_is_one_plain_conditional_write_and_its_retry_after_a_commit_meets_its_own_write(
    aws: Aws,
) -> None:
    calls: list[str] = []
    aws.ddb.meta.events.register("before-call.dynamodb", lambda model, **_: calls.append(model.name))
    aws.ddb.put_item(TableName=aws.table, Item={"id": {"S": "order#o-1"}, "status": {"S": "CREATED"}})
    cancel = status_change(
        aws,
        "order#o-1",
        "CREATED",
        "CANCELLED",
        lambda old: IllegalTransition(f"order o-1 is {old['status'] if old else 'gone'}"),
    )
    apply_write(cancel, ddb_client=aws.ddb)
    # One UpdateItem: a one-item transaction would bill the item's write units twice.
    assert calls == ["PutItem", "UpdateItem"]
    assert aws.item("order#o-1")["status"]["S"] == "CANCELLED"  # type: ignore[index]
    # Sent again (botocore's retry after a lost reply), the write meets the item as it left it: the
    # explanation sees that item, which is how a caller tells its own write from a conflict.
    with pytest.raises(IllegalTransition, match="order o-1 is CANCELLED"):
        apply_write(cancel, ddb_client=aws.ddb)
    unexplained = put(aws.table, {"id": "order#o-1", "status": "NEW"}, "attribute_not_exists(id)")
    with pytest.raises(PermanentError, match="ConditionalCheckFailed"):
        apply_write(unexplained, ddb_client=aws.ddb)
    assert aws.item("order#o-1")["status"]["S"] == "CANCELLED"  # type: ignore[index]


def queue_counts(aws: Aws) -> dict[str, int]:
    names = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ]
    attrs = aws.sqs.get_queue_attributes(QueueUrl=aws.queue_url, AttributeNames=names)["Attributes"]
    return {name.removeprefix("ApproximateNumberOfMessages") or "visible": int(attrs[name]) for name in names}


def receive_all(aws: Aws) -> list[dict[str, Any]]:
    return list(
        aws.sqs.receive_message(
            QueueUrl=aws.queue_url,
            MaxNumberOfMessages=10,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
    )


def test_transient_failure_with_a_budget_is_re_sent_delayed_and_the_original_deleted(aws: Aws) -> None:
    body = envelope(ids={"accountId": "a1"}).to_json()
    tenant = {"tenant": {"DataType": "String", "StringValue": "acme"}}
    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=body, MessageAttributes=tenant)
    # A first receive that crashed: the original's receive count is 2 at the failing delivery.
    aws.sqs.receive_message(QueueUrl=aws.queue_url, VisibilityTimeout=0)
    sent: list[dict[str, Any]] = []

    def record_send(params: dict[str, Any], **_: Any) -> None:
        sent.append(dict(params))

    aws.sqs.meta.events.register("provide-client-params.sqs.SendMessage", record_send)

    def sick_dependency(env: Envelope, ctx: RecordContext) -> None:
        raise DependencyUnavailable("payment system timed out")

    budgeted = dataclasses.replace(aws.settings, retry_budget_seconds=3600, backoff_base_seconds=1)
    try:
        response = deliver(aws, sick_dependency, settings=budgeted)
    finally:
        aws.sqs.meta.events.unregister("provide-client-params.sqs.SendMessage", record_send)

    assert response == {"batchItemFailures": []}  # reported handled: the original is deleted
    assert queue_counts(aws) == {"visible": 0, "NotVisible": 0, "Delayed": 1}  # only the delayed copy
    (params,) = sent
    assert params["QueueUrl"] == aws.queue_url and params["DelaySeconds"] == 1
    assert receive_all(aws) == []  # not before its delay

    time.sleep(params["DelaySeconds"] + 0.1)
    (copy,) = receive_all(aws)
    attrs = copy["MessageAttributes"]
    assert copy["Body"] == body
    assert copy["Attributes"]["ApproximateReceiveCount"] == "1"  # a new message: maxReceiveCount starts over
    assert attrs["tenant"]["StringValue"] == "acme"
    assert (attrs["relay.attempt"]["DataType"], attrs["relay.attempt"]["StringValue"]) == ("Number", "1")
    assert attrs["relay.firstFailureAt"]["DataType"] == "Number"
    assert abs(float(attrs["relay.firstFailureAt"]["StringValue"]) - time.time()) < 30
    assert attrs["relay.lastError"]["StringValue"] == "payment system timed out"
    assert aws.dlq_messages() == []


def test_a_transient_failure_after_the_budget_lands_in_the_dlq_with_the_reason(aws: Aws) -> None:
    first = datetime.now(UTC) - timedelta(hours=2)
    body = envelope(ids={"accountId": "a1"}).to_json()
    aws.sqs.send_message(
        QueueUrl=aws.queue_url,
        MessageBody=body,
        MessageAttributes={
            "tenant": {"DataType": "String", "StringValue": "acme"},
            "relay.attempt": {"DataType": "Number", "StringValue": "5"},
            "relay.firstFailureAt": {"DataType": "Number", "StringValue": str(first.timestamp())},
            "relay.lastError": {"DataType": "String", "StringValue": "payment system timed out"},
        },
    )

    def still_sick(env: Envelope, ctx: RecordContext) -> None:
        raise TimeoutError("payment system did not answer")

    response = deliver(aws, still_sick, settings=dataclasses.replace(aws.settings, retry_budget_seconds=3600))
    assert response == {"batchItemFailures": []}
    assert queue_counts(aws) == {"visible": 0, "NotVisible": 0, "Delayed": 0}
    (parked,) = aws.dlq_messages()
    attrs = parked["MessageAttributes"]
    assert parked["Body"] == body
    assert attrs["relay.errorClass"]["StringValue"] == "RetryBudgetSpent"
    reason = attrs["relay.errorMessage"]["StringValue"]
    assert "longer than the retry budget of 3600 s; gave up after 6 attempts" in reason
    assert "payment system did not answer" in reason
    parked_first = datetime.fromisoformat(attrs["relay.firstFailureAt"]["StringValue"].replace("Z", "+00:00"))
    assert abs((parked_first - first).total_seconds()) < 0.01
    assert attrs["tenant"]["StringValue"] == "acme"
    assert "relay.attempt" not in attrs  # a redrive starts a new chain, with a full budget


def test_an_already_applied_change_the_handler_lets_through_is_acknowledged_not_retried_or_parked(
    aws: Aws,
) -> None:
    from relay.state_machine import AlreadyApplied

    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=envelope(ids={"accountId": "a1"}).to_json())

    def already_there(env: Envelope, ctx: RecordContext) -> None:
        raise AlreadyApplied("account a1 is already CREDITED")

    assert deliver(aws, already_there, visibility_timeout=0) == {"batchItemFailures": []}
    assert receive_all(aws) == []  # deleted: no redelivery, no delayed copy
    assert aws.dlq_messages() == []  # not parked
