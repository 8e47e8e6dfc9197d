from __future__ import annotations

import pytest
from stacks import bare, queue, topic


def _subscription_to(s, path_suffix):
    queue_id = s.logical_id(path_suffix)
    (sub,) = [
        v["Properties"]
        for v in s.resources("AWS::SNS::Subscription").values()
        if v["Properties"]["Endpoint"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    ]
    return sub


def test_topic_is_encrypted_and_refuses_publish_without_tls(synthesized):
    topic_id = synthesized.logical_id("Events/Topic/Resource")
    topic = synthesized.json["Resources"][topic_id]["Properties"]
    assert str(topic["KmsMasterKeyId"]).endswith(":alias/aws/sns']]}")
    (policy,) = [
        p["Properties"]
        for p in synthesized.resources("AWS::SNS::TopicPolicy").values()
        if p["Properties"]["Topics"] == [{"Ref": topic_id}]
    ]
    assert any(
        s["Effect"] == "Deny"
        and s["Action"] == "sns:Publish"
        and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in policy["PolicyDocument"]["Statement"]
    )


def test_subscription_queue_policy_allows_sns_only_from_this_topic(synthesized):
    topic_id = synthesized.logical_id("Events/Topic/Resource")
    for path in ("Work/Queue/Resource", "Audit/Queue/Resource"):
        queue_id = synthesized.logical_id(path)
        statements = [
            s
            for p in synthesized.resources("AWS::SQS::QueuePolicy").values()
            if {"Ref": queue_id} in p["Properties"]["Queues"]
            for s in p["Properties"]["PolicyDocument"]["Statement"]
            if s["Effect"] == "Allow"
        ]
        (allow,) = statements
        assert allow["Principal"] == {"Service": "sns.amazonaws.com"}
        assert allow["Action"] == "sqs:SendMessage"
        assert allow["Condition"] == {"ArnEquals": {"aws:SourceArn": {"Ref": topic_id}}}


def test_subscribe_sets_filter_policy_and_raw_delivery(synthesized):
    work = _subscription_to(synthesized, "Work/Queue/Resource")
    assert work["FilterPolicy"] == {"eventType": ["ThingHappened"]}
    assert work.get("RawMessageDelivery") in (None, False)
    audit = _subscription_to(synthesized, "Audit/Queue/Resource")
    assert audit["RawMessageDelivery"] is True
    assert "FilterPolicy" not in audit


def test_undeliverable_messages_go_to_a_subscription_dlq(synthesized):
    dlq_id = synthesized.logical_id("Events/Undeliverable/Resource")
    for path in ("Work/Queue/Resource", "Audit/Queue/Resource"):
        sub = _subscription_to(synthesized, path)
        assert sub["RedrivePolicy"] == {"deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]}}


def test_fifo_queue_cannot_subscribe_to_a_standard_topic():
    def body(stack):
        topic(stack, "T", name="t").subscribe(queue(stack, "Q", name="q", fifo=True))

    with pytest.raises(ValueError, match="cannot deliver to FIFO"):
        bare(body)
