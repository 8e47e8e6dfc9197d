"""Patch 1 (``emulator.patches.untrack_models``): moto's registry of model objects, with and without it."""

from __future__ import annotations

import boto3
from moto import mock_aws

from emulator.patches import untrack_models
from tests.sandbox.patches.support import installed


def _messages_kept_by_moto_after_a_send_and_receive_of_five() -> int:
    from moto.sqs.models import Message

    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        before = len(Message.instances_tracked)
        for i in range(5):
            sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
        received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        assert sorted(m["Body"] for m in received) == [f"m{i}" for i in range(5)]
        return len(Message.instances_tracked) - before


def test_moto_keeps_no_model_object_and_still_answers() -> None:
    """moto keeps every message sent and every copy it returns (10 here, for its dashboard); with
    the patch it keeps none, and the queue answers the same."""
    assert _messages_kept_by_moto_after_a_send_and_receive_of_five() >= 10
    with installed(untrack_models.install):
        assert _messages_kept_by_moto_after_a_send_and_receive_of_five() == 0
