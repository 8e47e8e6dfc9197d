"""`python -m ops` against the running sandbox (in process, the CLI's own main): status receives nothing,
sample warns and shows reasons, a dry run moves nothing, a redrive of still-broken messages stops after
its first batch, a redrive after the root cause is fixed completes the operations once, doctor passes
and fails on a broken subscription."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from emulator.server import client
from local.sandbox import Sandbox
from tests.e2e import api
from tests.e2e.test_payments_e2e import payment, queue_url

pytestmark = pytest.mark.e2e

DLQ = "payments-payment-requests-dlq"


def ops(sb: Sandbox, *argv: str) -> int:
    from ops.__main__ import main

    return main([*argv, "--endpoint-url", sb.endpoint])


def depth(sb: Sandbox, suffix: str) -> int:
    attrs = client("sqs", sb.endpoint).get_queue_attributes(
        QueueUrl=queue_url(sb, suffix), AttributeNames=["All"]
    )["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])


def wait_depth(sb: Sandbox, suffix: str, expected: int, timeout: float = 30) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline and depth(sb, suffix) != expected:
        time.sleep(0.3)
    assert depth(sb, suffix) == expected


def park_poison(sb: Sandbox, count: int) -> None:
    before = depth(sb, DLQ)
    sqs = client("sqs", sb.endpoint)
    for _ in range(count):
        sqs.send_message(QueueUrl=queue_url(sb, "payments-payment-requests"), MessageBody="{not json")
    wait_depth(sb, DLQ, before + count)


def drain(sb: Sandbox, suffix: str) -> None:
    """Delete every message of the queue (PurgeQueue allows one call a minute, as on AWS)."""
    sqs, url = client("sqs", sb.endpoint), queue_url(sb, suffix)
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30).get(
        "Messages", []
    ):
        sqs.delete_message_batch(
            QueueUrl=url,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
        )


def test_status_sample_and_dry_run_leave_the_dlq_as_it_was(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    drain(sandbox, DLQ)
    park_poison(sandbox, 2)

    assert ops(sandbox, "status", "--json") == 0
    status = json.loads(capsys.readouterr().out)
    assert DLQ in json.dumps(status)
    # status received nothing: the first receive now is each message's first.
    sqs = client("sqs", sandbox.endpoint)
    got = sqs.receive_message(
        QueueUrl=queue_url(sandbox, DLQ), MaxNumberOfMessages=10, AttributeNames=["All"], VisibilityTimeout=0
    )["Messages"]
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in got} == {"1"}

    assert ops(sandbox, "dlq", "sample", "payment-requests-dlq", "--yes") == 0
    sampled = capsys.readouterr().out
    assert "WARNING" in sampled and "InvalidInput" in sampled

    assert (
        ops(sandbox, "dlq", "redrive", "payment-requests-dlq", "--reason", "look only", "--dry-run", "--yes")
        == 0
    )
    assert "InvalidInput" in capsys.readouterr().out
    wait_depth(sandbox, DLQ, 2)
    drain(sandbox, DLQ)


def test_a_redrive_of_still_broken_messages_stops_after_the_first_batch(sandbox: Sandbox) -> None:
    drain(sandbox, DLQ)
    park_poison(sandbox, 4)

    code = ops(
        sandbox, "dlq", "redrive", "payment-requests-dlq", "--reason", "not fixed", "--first", "2", "--yes"
    )

    assert code == 1
    wait_depth(sandbox, DLQ, 4)  # the two moved came back, the other two never moved
    drain(sandbox, DLQ)


def test_a_redrive_after_the_root_cause_is_fixed_completes_each_operation_once(sandbox: Sandbox) -> None:
    drain(sandbox, DLQ)
    s3 = client("s3", sandbox.endpoint)
    # The root cause: a request's claim check was overwritten while its payment waited on an outage.
    sandbox.legacy.set_knobs(outage=True)
    try:
        operations: list[tuple[str, str, str, bytes]] = []
        for _ in range(3):
            body = payment(payer="ops-e2e")
            body["details"] = {"memo": "x" * 70_000}  # above the 64 KB claim-check threshold: in S3
            response = api.post(
                sandbox,
                "/payments",
                json=body,
                headers={"Idempotency-Key": uuid.uuid4().hex},
            )
            operation_id = response.json()["operationId"]
            view = api.get(sandbox, f"/operations/{operation_id}").json()
            while not view.get("nextAttemptAt"):
                time.sleep(0.2)
                view = api.get(sandbox, f"/operations/{operation_id}").json()
            bucket, key = view["results"]["request"].removeprefix("s3://").split("/", 1)
            original = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
            s3.put_object(Bucket=bucket, Key=key, Body=b'{"tampered": true}')
            operations.append((operation_id, bucket, key, original))
        wait_depth(sandbox, DLQ, 3)
    finally:
        sandbox.legacy.set_knobs(outage=False)
    for _, bucket, key, original in operations:  # the fix
        s3.put_object(Bucket=bucket, Key=key, Body=original)

    code = ops(
        sandbox,
        "dlq",
        "redrive",
        "payment-requests-dlq",
        "--reason",
        "restored",
        "--first",
        "1",
        "--rate",
        "5",
        "--yes",
    )

    assert code == 0
    for operation_id, *_ in operations:
        deadline, status = time.time() + 60, ""
        while time.time() < deadline and status != "COMPLETED":
            status = api.get(sandbox, f"/operations/{operation_id}").json()["status"]
            time.sleep(0.5)
        assert status == "COMPLETED"
        assert sandbox.legacy.charges_by_operation()[operation_id] == 1
    assert depth(sandbox, DLQ) == 0
    # The parked ledger knew each one's message without a receive, and now says it was redriven.
    from ops.app import App
    from ops.lookup import parked_messages

    app = App(stage="dev", endpoint_url=sandbox.endpoint)
    for operation_id, *_ in operations:
        (entry,) = parked_messages(app, "operationId", operation_id)
        assert entry["errorClass"] == "ClaimCheckMismatch" and entry["status"] == "REDRIVEN"
        assert entry["redriveReason"] == "restored"


def test_doctor_passes_on_the_sandbox_and_fails_on_a_broken_subscription(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ops(sandbox, "doctor", "--service", "payments") == 0
    capsys.readouterr()
    sns = client("sns", sandbox.endpoint)
    (topic,) = [
        t["TopicArn"]
        for t in sns.list_topics()["Topics"]
        if t["TopicArn"].endswith("payments-payment-events")
    ]
    subscription = next(
        s["SubscriptionArn"]
        for s in sns.list_subscriptions_by_topic(TopicArn=topic)["Subscriptions"]
        if s["Endpoint"].endswith("payments-post-processing")
    )
    sns.set_subscription_attributes(
        SubscriptionArn=subscription, AttributeName="RawMessageDelivery", AttributeValue="true"
    )
    try:
        assert ops(sandbox, "doctor", "--service", "payments") == 1
        assert "FAIL" in capsys.readouterr().out
    finally:
        sns.set_subscription_attributes(
            SubscriptionArn=subscription, AttributeName="RawMessageDelivery", AttributeValue="false"
        )
