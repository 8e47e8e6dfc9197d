"""Patch 10 (``emulator.patches.message_move_tasks``): a DLQ redrive through the API, with and without
the patch. The operations' every answer and error is specified in tests/sandbox/test_message_move_tasks.py,
against a moto server."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import boto3
import pytest
from moto import mock_aws

from emulator.patches import message_move_tasks
from tests.sandbox.patches.support import installed


def _work_queue_with_a_parked_message(sqs: Any) -> tuple[str, str, str]:
    """A work queue whose DLQ holds one message moto's redrive policy moved there: (work queue URL,
    DLQ URL, DLQ ARN)."""
    dlq = sqs.create_queue(QueueName="work-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})
    work = sqs.create_queue(QueueName="work", Attributes={"RedrivePolicy": policy})["QueueUrl"]
    sqs.send_message(QueueUrl=work, MessageBody="poison")
    sqs.receive_message(QueueUrl=work, VisibilityTimeout=0)  # its one allowed receive
    assert "Messages" not in sqs.receive_message(QueueUrl=work)  # the second moved it to the DLQ
    return work, dlq, dlq_arn


def test_moto_cannot_start_a_message_move_task() -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        _, _, dlq_arn = _work_queue_with_a_parked_message(sqs)
        with pytest.raises(NotImplementedError, match="start_message_move_task"):
            sqs.start_message_move_task(SourceArn=dlq_arn)


def test_a_message_move_task_redrives_a_dlq_to_the_queue_each_message_came_from() -> None:
    with installed(message_move_tasks.install), mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        work, dlq, dlq_arn = _work_queue_with_a_parked_message(sqs)

        handle = sqs.start_message_move_task(SourceArn=dlq_arn)["TaskHandle"]

        deadline = time.monotonic() + 10
        while (task := sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"][0])["Status"] == "RUNNING":
            assert time.monotonic() < deadline, task
            time.sleep(0.05)
        assert task["Status"] == "COMPLETED"
        assert (task["ApproximateNumberOfMessagesMoved"], task["ApproximateNumberOfMessagesToMove"]) == (1, 1)
        assert json.loads(base64.b64decode(handle))["sourceArn"] == dlq_arn  # AWS's handle format
        assert "Messages" not in sqs.receive_message(QueueUrl=dlq)
        assert [m["Body"] for m in sqs.receive_message(QueueUrl=work)["Messages"]] == ["poison"]
