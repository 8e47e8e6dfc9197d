"""The whole app, as `make synth` builds it: cdk-nag clean, guards clean, and the reliability rules hold
in every synthesized template."""

from __future__ import annotations

from typing import Any

import pytest

from infra import guards


@pytest.fixture(scope="module")
def templates(app_templates: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return app_templates


def _resources(templates, kind):
    return [
        (name, logical_id, resource.get("Properties", {}))
        for name, template in templates.items()
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == kind
    ]


def test_the_app_has_a_core_stack_with_bus_and_alarm_topic_and_no_layers(templates):
    core = templates["relay-dev-core"]["Resources"]
    kinds = [r["Type"] for r in core.values()]
    assert kinds.count("AWS::Events::EventBus") == 1
    assert kinds.count("AWS::SNS::Topic") == 1
    # Each service stack builds its own layers (tests/infra/test_layers.py): core exports none.
    assert kinds.count("AWS::Lambda::LayerVersion") == 0


def test_alarm_topic_uses_a_rotating_customer_key_cloudwatch_can_use(templates):
    core = templates["relay-dev-core"]["Resources"]
    (key,) = [r["Properties"] for r in core.values() if r["Type"] == "AWS::KMS::Key"]
    assert key["EnableKeyRotation"] is True
    assert any(
        s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"} for s in key["KeyPolicy"]["Statement"]
    )


def test_no_guard_finding_in_any_template(templates):
    assert guards.check_templates(templates) == []


def test_every_queue_is_encrypted_and_tls_only(templates):
    queues = _resources(templates, "AWS::SQS::Queue")
    policies = _resources(templates, "AWS::SQS::QueuePolicy")
    for stack, logical_id, props in queues:
        assert props.get("SqsManagedSseEnabled") is True or "KmsMasterKeyId" in props
        assert any(
            {"Ref": logical_id} in policy["Queues"]
            and any(
                s["Effect"] == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
                for s in policy["PolicyDocument"]["Statement"]
            )
            for policy_stack, _, policy in policies
            if policy_stack == stack
        ), f"{stack}/{logical_id} has no TLS-only policy"


def test_every_sqs_event_source_reports_batch_item_failures(templates):
    for _, _, mapping in _resources(templates, "AWS::Lambda::EventSourceMapping"):
        if "Queue" in str(mapping["EventSourceArn"]):
            assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_every_dlq_has_an_alarm(templates):
    alarmed = {
        str(d["Value"])
        for _, _, alarm in _resources(templates, "AWS::CloudWatch::Alarm")
        if alarm.get("MetricName") == "ApproximateNumberOfMessagesVisible"
        for d in alarm.get("Dimensions", [])
    }
    for stack, logical_id, props in _resources(templates, "AWS::SQS::Queue"):
        if "RedrivePolicy" not in props:
            assert str({"Fn::GetAtt": [logical_id, "QueueName"]}) in alarmed, f"{stack}/{logical_id}"
