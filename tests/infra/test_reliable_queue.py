from __future__ import annotations

import pytest
from aws_cdk import App
from stacks import bare
from stacks import queue as reliable_queue

from infra.constructs.reliable_queue import ReliableQueue


def _sources(s):
    return {k: v for k, v in s.resources("AWS::SQS::Queue").items() if "RedrivePolicy" in v["Properties"]}


def test_every_queue_has_a_dlq_with_max_receive_count_at_least_5(synthesized):
    queues = synthesized.resources("AWS::SQS::Queue")
    sources = _sources(synthesized)
    assert {"Work", "Ordered", "Audit"} <= {
        synthesized.json["Resources"][k]["Metadata"]["aws:cdk:path"].split("/")[1] for k in sources
    }
    for logical_id, queue in sources.items():
        redrive = queue["Properties"]["RedrivePolicy"]
        assert redrive["maxReceiveCount"] >= 5
        dlq_id = redrive["deadLetterTargetArn"]["Fn::GetAtt"][0]
        assert dlq_id in queues and dlq_id != logical_id


def test_max_receive_count_defaults_to_5(synthesized):
    work = synthesized.json["Resources"][synthesized.logical_id("Work/Queue/Resource")]
    assert work["Properties"]["RedrivePolicy"]["maxReceiveCount"] == 5


def test_max_receive_count_below_5_is_refused():
    with pytest.raises(ValueError, match="max_receive_count=3 is below 5"):
        bare(lambda stack: reliable_queue(stack, "Q", name="q", max_receive_count=3))


def test_dlq_retains_messages_for_14_days(synthesized):
    for suffix in ("Work/Dlq/Resource", "Ordered/Dlq/Resource", "Events/Undeliverable/Resource"):
        dlq = synthesized.json["Resources"][synthesized.logical_id(suffix)]
        assert dlq["Properties"]["MessageRetentionPeriod"] == 14 * 24 * 3600


def test_dlq_redrive_allow_policy_names_only_its_source_queue(synthesized):
    dlq = synthesized.json["Resources"][synthesized.logical_id("Work/Dlq/Resource")]["Properties"]
    policy = dlq["RedriveAllowPolicy"]
    assert policy["redrivePermission"] == "byQueue"
    (source_arn,) = policy["sourceQueueArns"]
    work = synthesized.json["Resources"][synthesized.logical_id("Work/Queue/Resource")]["Properties"]
    assert work["QueueName"] == "relay-dev-svc-work"
    assert "relay-dev-svc-work" in str(source_arn) and "dlq" not in str(source_arn)


def test_queues_use_sse_sqs_not_the_aws_managed_key(synthesized):
    for queue in synthesized.resources("AWS::SQS::Queue").values():
        props = queue["Properties"]
        assert props.get("SqsManagedSseEnabled") is True
        assert "KmsMasterKeyId" not in props


def test_every_queue_policy_denies_requests_without_tls(synthesized):
    queues = set(synthesized.resources("AWS::SQS::Queue"))
    covered = set()
    for policy in synthesized.resources("AWS::SQS::QueuePolicy").values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        denies_plain_http = any(
            s["Effect"] == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
            for s in statements
        )
        if denies_plain_http:
            covered |= {q["Ref"] for q in policy["Properties"]["Queues"]}
    assert covered == queues


def test_fifo_variant_has_a_fifo_dlq_and_optional_content_dedup(synthesized):
    queue = synthesized.json["Resources"][synthesized.logical_id("Ordered/Queue/Resource")]["Properties"]
    dlq = synthesized.json["Resources"][synthesized.logical_id("Ordered/Dlq/Resource")]["Properties"]
    assert queue["FifoQueue"] is True and queue["ContentBasedDeduplication"] is True
    assert queue["QueueName"].endswith(".fifo")
    assert dlq["FifoQueue"] is True and dlq["QueueName"].endswith("-dlq.fifo")
    work = synthesized.json["Resources"][synthesized.logical_id("Work/Queue/Resource")]["Properties"]
    assert "FifoQueue" not in work and "ContentBasedDeduplication" not in work


def test_content_based_dedup_requires_fifo():
    with pytest.raises(ValueError, match="needs fifo=True"):
        bare(lambda stack: reliable_queue(stack, "Q", name="q", content_based_deduplication=True))


def test_reliable_queue_without_its_naming_settings_and_removal_policy_is_refused():
    # Constructs no longer look these up in a RelayStack: they are required arguments, so a queue
    # cannot be built without them (nor, by forgetting one, with a silent default).
    from aws_cdk import Stack

    app = App()
    with pytest.raises(TypeError, match="missing 3 required keyword-only arguments: 'naming', 'settings'"):
        ReliableQueue(Stack(app, "plain"), "Q", name="q")
