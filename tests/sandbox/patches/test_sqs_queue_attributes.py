"""Patch 7 (``emulator.patches.sqs_queue_attributes``): moto's own answers are the reference for
visibility, delay, retention and the queue attributes; what the patch spares is computing every
attribute of the queue again for each message a receive returns."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core.models import DEFAULT_ACCOUNT_ID

from emulator.patches import sqs_queue_attributes
from tests.sandbox.patches.support import installed


def test_the_patch_keeps_visibility_delay_retention_and_the_queue_attributes() -> None:
    """The patch reads time and the retention period directly; moto's own answers are the reference."""
    from moto.sqs.models import sqs_backends

    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="q", Attributes={"MessageRetentionPeriod": "60"})["QueueUrl"]
        for i in range(6):
            sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
        sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=30)
        in_flight = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2, VisibilityTimeout=30)
        queue = sqs_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].queues["q"]
        expired = next(m for m in queue._messages if m.body == "m5")
        expired.sent_timestamp -= 120_000  # sent two minutes ago: past the 60 s retention
        names = [["All"], ["ApproximateNumberOfMessages", "QueueArn"], ["ApproximateNumberOfMessagesDelayed"]]
        unpatched = [sqs.get_queue_attributes(QueueUrl=url, AttributeNames=n)["Attributes"] for n in names]
        with installed(sqs_queue_attributes.install):
            patched = [sqs.get_queue_attributes(QueueUrl=url, AttributeNames=n)["Attributes"] for n in names]
            received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30)
    assert patched == unpatched
    assert unpatched[1]["ApproximateNumberOfMessages"] == "4"  # 6 sent, 2 in flight; the delayed one apart
    assert unpatched[2] == {"ApproximateNumberOfMessagesDelayed": "1"}
    bodies = sorted(m["Body"] for m in received["Messages"])
    taken = {m["Body"] for m in in_flight["Messages"]}
    # Not the in-flight ones, not the delayed one, not the one past its retention period.
    assert bodies == sorted({"m0", "m1", "m2", "m3", "m4"} - taken)


def _attribute_computations(monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """How many times the queue's attributes are all computed for one ReceiveMessage of 10 messages
    (out of 50 queued), and for one GetQueueAttributes of 3 names."""
    from moto.sqs.models import Queue

    computed = [0]
    attributes = Queue.attributes

    def counted(self: Any) -> Any:
        computed[0] += 1
        return attributes.fget(self)  # type: ignore[attr-defined]

    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        for i in range(50):
            sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
        with monkeypatch.context() as counting:
            counting.setattr(Queue, "attributes", property(counted))
            received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
            assert len(received) == 10
            on_receive, computed[0] = computed[0], 0
            names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "QueueArn"]
            answer = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
            assert answer["ApproximateNumberOfMessagesNotVisible"] == "10"
    return on_receive, computed[0]


def test_a_receive_computes_no_queue_attributes_and_a_get_computes_them_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """moto computes all the queue's attributes (passes over every queued message) for each message a
    receive returns, and several times per GetQueueAttributes; the patch never on receive, once on get."""
    on_receive, on_get = _attribute_computations(monkeypatch)
    assert on_receive >= 10 and on_get >= 3
    with installed(sqs_queue_attributes.install):
        assert _attribute_computations(monkeypatch) == (0, 1)
