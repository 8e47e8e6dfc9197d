"""The synthesized alarms fire in the sandbox: a message parked in payment-requests' DLQ takes the DLQ alarm
(ApproximateNumberOfMessagesVisible, Maximum over one 60 s period, > 0) to ALARM with CloudWatch's
notification on the alarm topic; after the root cause is fixed and `ops dlq redrive` empties the DLQ,
the period ends (the stage's clock moved on, not waited for) and the alarm is OK again, notified too."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from emulator.server import client
from local.sandbox import Sandbox
from tests.e2e import api
from tests.e2e.test_ops_e2e import DLQ, depth, drain, ops, wait_depth
from tests.e2e.test_payments_e2e import payment, queue_url

pytestmark = pytest.mark.e2e

PERIOD = 60  # the template's, asserted below


def dlq_alarm(sb: Sandbox) -> dict[str, Any]:
    """The alarm the monitoring construct synthesized on the DLQ's depth."""
    dlq_name = queue_url(sb, DLQ).rsplit("/", 1)[-1]
    cw = client("cloudwatch", sb.endpoint)
    (alarm,) = [
        a
        for a in cw.describe_alarms(AlarmTypes=["MetricAlarm"])["MetricAlarms"]
        if a.get("MetricName") == "ApproximateNumberOfMessagesVisible"
        and {"Name": "QueueName", "Value": dlq_name} in a.get("Dimensions", [])
    ]
    return dict(alarm)


def state(sb: Sandbox, name: str) -> str:
    alarms = client("cloudwatch", sb.endpoint).describe_alarms(AlarmNames=[name])["MetricAlarms"]
    return str(alarms[0]["StateValue"])


def subscribe_inbox(sb: Sandbox, topic_arn: str) -> str:
    """A queue subscribed to the alarm topic (not raw: the SNS envelope, as an email or a pager gets)."""
    sqs, sns = client("sqs", sb.endpoint), client("sns", sb.endpoint)
    url = sqs.create_queue(QueueName=f"alarm-inbox-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=arn)
    return str(url)


def notifications(sb: Sandbox, inbox: str, alarm: str, new_state: str, timeout: float = 30) -> list[Any]:
    """The alarm's notifications of a change to ``new_state`` that reach the inbox within ``timeout``."""
    sqs = client("sqs", sb.endpoint)
    deadline, found = time.time() + timeout, []
    while time.time() < deadline and not found:
        for message in sqs.receive_message(QueueUrl=inbox, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
            "Messages", []
        ):
            envelope = json.loads(message["Body"])
            note = json.loads(envelope["Message"])
            if note["AlarmName"] == alarm and note["NewStateValue"] == new_state:
                found.append((envelope, note))
            sqs.delete_message(QueueUrl=inbox, ReceiptHandle=message["ReceiptHandle"])
    return found


def park_one_claim_check_mismatch(sb: Sandbox) -> tuple[str, str, str, bytes]:
    """A payment whose stored request is overwritten while it waits on a legacy outage: the worker
    parks it (ClaimCheckMismatch). Returns the operation and what restores its claim check."""
    s3 = client("s3", sb.endpoint)
    sb.legacy.set_knobs(outage=True)
    try:
        body = payment(payer="alarms-e2e")
        body["details"] = {"memo": "x" * 70_000}  # above the claim-check threshold: stored in S3
        response = api.post(sb, "/payments", json=body, headers={"Idempotency-Key": uuid.uuid4().hex})
        operation_id = response.json()["operationId"]
        deadline = time.time() + 60
        view = api.get(sb, f"/operations/{operation_id}").json()
        while time.time() < deadline and not view.get("nextAttemptAt"):
            time.sleep(0.2)
            view = api.get(sb, f"/operations/{operation_id}").json()
        bucket, key = view["results"]["request"].removeprefix("s3://").split("/", 1)
        original = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        s3.put_object(Bucket=bucket, Key=key, Body=b'{"tampered": true}')
        wait_depth(sb, DLQ, 1, timeout=60)
    finally:
        sb.legacy.set_knobs(outage=False)
    return operation_id, bucket, key, original


def test_a_parked_message_sets_off_the_dlq_alarm_and_the_redrive_brings_it_back_to_ok(
    sandbox: Sandbox,
) -> None:
    alarm = dlq_alarm(sandbox)
    name = alarm["AlarmName"]
    # As synthesized: one 60 s period of the DLQ's Maximum depth, above 0, to the alarm topic.
    assert (alarm["Period"], alarm["EvaluationPeriods"], alarm["Statistic"]) == (PERIOD, 1, "Maximum")
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    (topic,) = set(alarm["AlarmActions"]) | set(alarm["OKActions"])
    assert topic == sandbox.topology.topics[topic.rsplit(":", 1)[-1]]
    inbox = subscribe_inbox(sandbox, topic)

    drain(sandbox, DLQ)
    sandbox.evaluate_alarms(advance=PERIOD + 1)  # a whole period of an empty DLQ
    assert state(sandbox, name) == "OK"
    client("sqs", sandbox.endpoint).purge_queue(QueueUrl=inbox)

    operation_id, bucket, key, original = park_one_claim_check_mismatch(sandbox)
    sandbox.evaluate_alarms()
    assert state(sandbox, name) == "ALARM"
    ((envelope, note),) = notifications(sandbox, inbox, name, "ALARM")
    assert envelope["Subject"] == f'ALARM: "{name}" in US East (N. Virginia)'
    assert note["OldStateValue"] == "OK"
    assert note["AlarmDescription"] == alarm["AlarmDescription"]
    assert note["Trigger"]["Period"] == PERIOD and note["Trigger"]["Statistic"] == "MAXIMUM"
    assert "Threshold Crossed: 1 out of the last 1 datapoints [1.0" in note["NewStateReason"]

    client("s3", sandbox.endpoint).put_object(Bucket=bucket, Key=key, Body=original)  # the fix
    assert ops(sandbox, "dlq", "redrive", "payment-requests-dlq", "--reason", "restored", "--yes") == 0
    deadline, status = time.time() + 60, ""
    while time.time() < deadline and status != "COMPLETED":
        status = api.get(sandbox, f"/operations/{operation_id}").json()["status"]
        time.sleep(0.5)
    assert status == "COMPLETED"
    assert depth(sandbox, DLQ) == 0

    sandbox.evaluate_alarms(advance=PERIOD + 1)  # the period that saw the parked message is over
    assert state(sandbox, name) == "OK"
    ((_, note),) = notifications(sandbox, inbox, name, "OK")
    assert note["OldStateValue"] == "ALARM"
    assert sandbox.alarms is not None and sandbox.alarms.evaluator.failed_actions == []
    client("sqs", sandbox.endpoint).delete_queue(QueueUrl=inbox)


def test_every_rule_alarm_watches_a_rule_that_exists_under_eventbridges_own_dimensions(
    sandbox: Sandbox,
) -> None:
    # EventBridge reports a custom bus's rule under EventBusName + the rule's plain name; the rule's
    # CloudFormation Ref is "bus|name", which no metric carries (infra.constructs.monitoring._watch_rule).
    events = client("events", sandbox.endpoint)
    rule_alarms = [
        a
        for a in client("cloudwatch", sandbox.endpoint).describe_alarms(AlarmTypes=["MetricAlarm"])[
            "MetricAlarms"
        ]
        if a.get("Namespace") == "AWS/Events"
    ]
    assert len(rule_alarms) >= 6  # FailedInvocations and InvocationsSentToDlq of each of 3 rules
    for alarm in rule_alarms:
        dims = {d["Name"]: d["Value"] for d in alarm["Dimensions"]}
        assert set(dims) == {"EventBusName", "RuleName"}, alarm["AlarmName"]
        assert "|" not in dims["RuleName"], alarm["AlarmName"]
        rules = events.list_rules(EventBusName=dims["EventBusName"])["Rules"]
        assert dims["RuleName"] in {r["Name"] for r in rules}, alarm["AlarmName"]
