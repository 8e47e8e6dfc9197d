"""Infra assertions for the event-bus rules (issue 17): each rule on the app's bus targets a reliable
queue with a retry policy, a maximum event age and a target DLQ; both queue policies admit EventBridge
for that rule only; the patterns are the contract's constants; alarms watch rule and DLQs."""

from __future__ import annotations

from typing import Any

import pytest
from orders.subscriptions import POINTS_RULE, SHIPPING_RULE

from infra.constructs import defaults

RULES = {
    ("relay-dev-orders", "ShippingRule"): ("ShippingQueue", SHIPPING_RULE),
    ("relay-dev-loyalty", "PointsRule"): ("PointsQueue", POINTS_RULE),
}


def _of(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v["Properties"] for k, v in template["Resources"].items() if v["Type"] == kind}


def _id(template: dict[str, Any], path_suffix: str) -> str:
    (logical_id,) = [
        k
        for k, v in template["Resources"].items()
        if v.get("Metadata", {}).get("aws:cdk:path", "").endswith(path_suffix)
    ]
    return logical_id


def _admits_events_for(policy: dict[str, Any], rule_id: str) -> list[dict[str, Any]]:
    return [
        s
        for s in policy["PolicyDocument"]["Statement"]
        if s["Effect"] == "Allow"
        and s.get("Principal") == {"Service": "events.amazonaws.com"}
        and s.get("Condition") == {"ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": [rule_id, "Arn"]}}}
    ]


def _policy_of(template: dict[str, Any], queue_id: str) -> dict[str, Any]:
    (policy,) = [
        p for p in _of(template, "AWS::SQS::QueuePolicy").values() if p["Queues"] == [{"Ref": queue_id}]
    ]
    return policy


@pytest.mark.parametrize(("stack", "rule"), sorted(RULES))
def test_every_bus_rule_targets_a_reliable_queue_with_retries_max_age_and_a_target_dlq(
    app_templates: dict[str, dict[str, Any]], stack: str, rule: str
) -> None:
    template = app_templates[stack]
    queue, pattern = RULES[(stack, rule)]
    rule_id = _id(template, f"{rule}/Rule/Resource")
    props = _of(template, "AWS::Events::Rule")[rule_id]
    (target,) = props["Targets"]
    queue_id = _id(template, f"{queue}/Queue/Resource")
    dlq_id = _id(template, f"{rule}/TargetDlq/Resource")

    assert props["EventPattern"] == pattern
    assert props["EventBusName"] == {
        "Fn::ImportValue": "relay-dev-core:ExportsOutputRefEventBus7B8748AA3BA3246C"
    }
    assert target["Arn"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    assert target["RetryPolicy"] == {
        "MaximumRetryAttempts": defaults.BUS_RULES.retry_attempts,
        "MaximumEventAgeInSeconds": defaults.BUS_RULES.max_event_age_seconds,
    }
    assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [dlq_id, "Arn"]}}
    # The target queue is a reliable queue: its own DLQ, redrive at >= 5 receives.
    redrive = _of(template, "AWS::SQS::Queue")[queue_id]["RedrivePolicy"]
    assert redrive["maxReceiveCount"] >= 5


@pytest.mark.parametrize(("stack", "rule"), sorted(RULES))
def test_every_bus_rule_queue_and_target_dlq_admit_eventbridge_for_that_rule_only(
    app_templates: dict[str, dict[str, Any]], stack: str, rule: str
) -> None:
    template = app_templates[stack]
    queue, _ = RULES[(stack, rule)]
    rule_id = _id(template, f"{rule}/Rule/Resource")
    for queue_id in (_id(template, f"{queue}/Queue/Resource"), _id(template, f"{rule}/TargetDlq/Resource")):
        policy = _policy_of(template, queue_id)
        (allow,) = _admits_events_for(policy, rule_id)
        assert "sqs:SendMessage" in (
            allow["Action"] if isinstance(allow["Action"], list) else [allow["Action"]]
        )
        # Nothing else is let in unconditioned.
        assert all(s.get("Condition") for s in policy["PolicyDocument"]["Statement"])


@pytest.mark.parametrize(("stack", "rule"), sorted(RULES))
def test_every_bus_rule_alarms_on_failed_invocations_dlq_deliveries_and_its_target_dlq(
    app_templates: dict[str, dict[str, Any]], stack: str, rule: str
) -> None:
    template = app_templates[stack]
    rule_id = _id(template, f"{rule}/Rule/Resource")
    dlq_id = _id(template, f"{rule}/TargetDlq/Resource")
    alarms = list(_of(template, "AWS::CloudWatch::Alarm").values())
    on_rule = {
        a["MetricName"]
        for a in alarms
        # a custom bus's rule, as EventBridge reports it: its bus and its plain name (the Ref is "bus|name")
        if {"Name": "RuleName", "Value": template["Resources"][rule_id]["Properties"]["Name"]}
        in a.get("Dimensions", [])
        and any(d["Name"] == "EventBusName" for d in a["Dimensions"])
    }
    on_dlq = [
        a
        for a in alarms
        if a["MetricName"] == "ApproximateNumberOfMessagesVisible"
        and {"Name": "QueueName", "Value": {"Fn::GetAtt": [dlq_id, "QueueName"]}} in a.get("Dimensions", [])
    ]
    assert on_rule == {"FailedInvocations", "InvocationsSentToDlq"}
    assert len(on_dlq) == 1


def test_the_outbox_publisher_may_put_events_on_the_app_bus_only(
    app_templates: dict[str, dict[str, Any]],
) -> None:
    template = app_templates["relay-dev-orders"]
    statements = [
        s
        for p in _of(template, "AWS::IAM::Policy").values()
        for s in p["PolicyDocument"]["Statement"]
        if "events:PutEvents" in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    ]
    (put,) = statements
    assert "EventBus" in str(put["Resource"]) and put["Resource"] != "*"
