"""DLQ redrive (SQS message move tasks, ``emulator.patches.message_move_tasks``, patch 10) and the read-only
queue ages (``emulator.sqs_admin``), through botocore against a moto server with the SQS patches the emulator
installs.
The error codes and messages asserted are the ones AWS answers (recorded against AWS by LocalStack's
snapshot tests) unless a test says otherwise."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from emulator import sqs_admin
from emulator.patches import message_move_tasks, sqs_queue_attributes
from emulator.server import ACCOUNT_ID, REGION, free_port
from tests.sandbox.moto_server import moto_server


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with moto_server(sqs_queue_attributes.install, message_move_tasks.install, sqs_admin.install) as url:
        yield url


@pytest.fixture
def sqs(endpoint: str) -> Any:
    return boto3.client(
        "sqs",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"max_attempts": 1}),
    )


@dataclass(frozen=True)
class Redrive:
    """A work queue and its DLQ, as the templates make them: the DLQ is its one redrive target."""

    source_url: str
    source_arn: str
    dlq_url: str
    dlq_arn: str


def _arn(name: str) -> str:
    return f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{name}"


def redrive_pair(sqs: Any) -> Redrive:
    name = f"work-{uuid.uuid4().hex[:8]}"
    dlq_url = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    policy = json.dumps({"deadLetterTargetArn": _arn(f"{name}-dlq"), "maxReceiveCount": 1})
    source_url = sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": policy})["QueueUrl"]
    return Redrive(source_url, _arn(name), dlq_url, _arn(f"{name}-dlq"))


def attributes(i: int) -> dict[str, Any]:
    return {
        "eventType": {"DataType": "String", "StringValue": f"order.created.{i}"},
        "attempt": {"DataType": "Number", "StringValue": str(i)},
        "digest": {"DataType": "Binary", "BinaryValue": bytes([i, 0, 255])},
    }


def dead_letter_by_redrive_policy(sqs: Any, pair: Redrive, count: int) -> None:
    """Messages the source queue's redrive policy moves to the DLQ (received once, maxReceiveCount 1)."""
    for i in range(count):
        sqs.send_message(QueueUrl=pair.source_url, MessageBody=f"body-{i}", MessageAttributes=attributes(i))
    sqs.receive_message(QueueUrl=pair.source_url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    sqs.receive_message(QueueUrl=pair.source_url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    assert counts(sqs, pair.dlq_url) == (count, 0)


def park(sqs: Any, pair: Redrive, count: int) -> None:
    """Messages sent to the DLQ directly, as the kernel parks a poison message."""
    for i in range(count):
        reason = {
            "relay.errorClass": {"DataType": "String", "StringValue": "PayloadInvalid"},
            "relay.sourceQueue": {"DataType": "String", "StringValue": pair.source_url},
        }
        sqs.send_message(QueueUrl=pair.dlq_url, MessageBody=f"parked-{i}", MessageAttributes=reason)


def counts(sqs: Any, url: str) -> tuple[int, int]:
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return int(found[names[0]]), int(found[names[1]])


def receive_all(sqs: Any, url: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    while batch := sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], AttributeNames=["All"]
    ).get("Messages", []):
        messages += batch
    return messages


def latest_task(sqs: Any, dlq_arn: str) -> dict[str, Any]:
    (task,) = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
    return dict(task)


def wait_for(
    sqs: Any, dlq_arn: str, done: Callable[[dict[str, Any]], bool], timeout: float = 10
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while not done(task := latest_task(sqs, dlq_arn)):
        assert time.monotonic() < deadline, f"task still {task}"
        time.sleep(0.02)
    return task


def error(call: Callable[[], Any]) -> tuple[str, str, int]:
    with pytest.raises(ClientError) as caught:
        call()
    response = caught.value.response
    return (
        response["Error"]["Code"],
        response["Error"]["Message"],
        response["ResponseMetadata"]["HTTPStatusCode"],
    )


# -- moving -------------------------------------------------------------------------------------------


def test_a_move_at_the_given_rate_returns_each_message_to_its_source_queue_as_a_new_message(sqs: Any) -> None:
    pair = redrive_pair(sqs)
    dead_letter_by_redrive_policy(sqs, pair, 5)
    in_dlq = sqs.receive_message(QueueUrl=pair.dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    dead_lettered_ids = {m["Body"]: m["MessageId"] for m in in_dlq["Messages"]}

    started = time.monotonic()
    handle = sqs.start_message_move_task(SourceArn=pair.dlq_arn, MaxNumberOfMessagesPerSecond=20)[
        "TaskHandle"
    ]
    task = wait_for(sqs, pair.dlq_arn, lambda t: t["Status"] != "RUNNING")
    elapsed = time.monotonic() - started

    assert task == {
        "Status": "COMPLETED",
        "SourceArn": pair.dlq_arn,
        "MaxNumberOfMessagesPerSecond": 20,
        "ApproximateNumberOfMessagesMoved": 5,
        "ApproximateNumberOfMessagesToMove": 5,
        "StartedTimestamp": task["StartedTimestamp"],
    }  # no DestinationArn (none was given), no TaskHandle once the task has stopped
    assert abs(task["StartedTimestamp"] / 1000 - time.time()) < 30
    assert handle  # opaque to callers
    assert elapsed >= 4 / 20  # the fifth message no earlier than 4/20 s after the start
    assert counts(sqs, pair.dlq_url) == (0, 0)
    moved = {m["Body"]: m for m in receive_all(sqs, pair.source_url)}
    assert sorted(moved) == [f"body-{i}" for i in range(5)]
    for i in range(5):
        message = moved[f"body-{i}"]
        assert message["MessageAttributes"] == attributes(i)
        assert message["Attributes"]["ApproximateReceiveCount"] == "1"  # a new message, never received
        assert message["MessageId"] != dead_lettered_ids[f"body-{i}"]


def test_parked_messages_need_a_destination_as_on_aws_where_their_source_is_unknown(sqs: Any) -> None:
    """The kernel parks with SendMessage: AWS cannot tell such a message's source queue, and a task
    without DestinationArn FAILS with CouldNotDetermineMessageSource; the message stays in the DLQ."""
    pair = redrive_pair(sqs)
    park(sqs, pair, 2)

    sqs.start_message_move_task(SourceArn=pair.dlq_arn)
    failed = wait_for(sqs, pair.dlq_arn, lambda t: t["Status"] != "RUNNING")
    assert (failed["Status"], failed["FailureReason"]) == ("FAILED", "CouldNotDetermineMessageSource")
    assert failed["ApproximateNumberOfMessagesMoved"] == 0
    assert counts(sqs, pair.dlq_url) == (2, 0)  # visible again, not lost

    sqs.start_message_move_task(SourceArn=pair.dlq_arn, DestinationArn=pair.source_arn)
    done = wait_for(sqs, pair.dlq_arn, lambda t: t["Status"] != "RUNNING")
    assert (done["Status"], done["ApproximateNumberOfMessagesMoved"]) == ("COMPLETED", 2)
    assert done["DestinationArn"] == pair.source_arn
    moved = receive_all(sqs, pair.source_url)
    assert sorted(m["Body"] for m in moved) == ["parked-0", "parked-1"]
    assert {m["MessageAttributes"]["relay.sourceQueue"]["StringValue"] for m in moved} == {pair.source_url}
    assert counts(sqs, pair.dlq_url) == (0, 0)


def test_a_second_start_on_the_same_dlq_while_one_runs_is_refused(sqs: Any) -> None:
    pair = redrive_pair(sqs)
    park(sqs, pair, 5)
    handle = sqs.start_message_move_task(
        SourceArn=pair.dlq_arn, DestinationArn=pair.source_arn, MaxNumberOfMessagesPerSecond=1
    )["TaskHandle"]

    assert error(
        lambda: sqs.start_message_move_task(SourceArn=pair.dlq_arn, DestinationArn=pair.source_arn)
    ) == (
        "InvalidParameterValue",
        "There is already a task running. Only one active task is allowed for a source queue arn at a given "
        "time.",
        400,
    )
    assert latest_task(sqs, pair.dlq_arn)["TaskHandle"] == handle  # the running one, untouched
    sqs.cancel_message_move_task(TaskHandle=handle)


def test_cancel_stops_a_slow_task_part_way_and_nothing_moves_after_it_answers(sqs: Any) -> None:
    pair = redrive_pair(sqs)
    park(sqs, pair, 10)
    handle = sqs.start_message_move_task(
        SourceArn=pair.dlq_arn, DestinationArn=pair.source_arn, MaxNumberOfMessagesPerSecond=10
    )["TaskHandle"]
    running = wait_for(sqs, pair.dlq_arn, lambda t: t["ApproximateNumberOfMessagesMoved"] >= 2)
    assert (running["Status"], running["TaskHandle"]) == ("RUNNING", handle)

    moved = sqs.cancel_message_move_task(TaskHandle=handle)["ApproximateNumberOfMessagesMoved"]
    cancelled = wait_for(sqs, pair.dlq_arn, lambda t: t["Status"] == "CANCELLED")

    assert 2 <= moved < 10
    assert cancelled["ApproximateNumberOfMessagesMoved"] == moved
    time.sleep(0.3)  # three more messages' worth at this rate
    assert counts(sqs, pair.source_url) == (moved, 0)
    assert counts(sqs, pair.dlq_url) == (10 - moved, 0)
    # Only a running task can be cancelled (the code and message are the sandbox's: AWS's not recorded).
    assert error(lambda: sqs.cancel_message_move_task(TaskHandle=handle))[0] == (
        "AWS.SimpleQueueService.UnsupportedOperation"
    )
    # A cancelled task is no longer active: the rest can be moved.
    sqs.start_message_move_task(SourceArn=pair.dlq_arn, DestinationArn=pair.source_arn)
    assert wait_for(sqs, pair.dlq_arn, lambda t: t["Status"] != "RUNNING")["Status"] == "COMPLETED"
    assert counts(sqs, pair.source_url) == (10, 0)
    listed = sqs.list_message_move_tasks(SourceArn=pair.dlq_arn, MaxResults=10)["Results"]
    assert [t["Status"] for t in listed] == ["COMPLETED", "CANCELLED"]  # newest first


def test_a_destination_deleted_while_the_task_runs_fails_it_and_keeps_the_rest_in_the_dlq(sqs: Any) -> None:
    pair = redrive_pair(sqs)
    park(sqs, pair, 5)
    elsewhere = sqs.create_queue(QueueName=f"elsewhere-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    sqs.start_message_move_task(
        SourceArn=pair.dlq_arn,
        DestinationArn=_arn(elsewhere.rsplit("/", 1)[1]),
        MaxNumberOfMessagesPerSecond=10,
    )
    wait_for(sqs, pair.dlq_arn, lambda t: t["ApproximateNumberOfMessagesMoved"] >= 1)
    sqs.delete_queue(QueueUrl=elsewhere)

    failed = wait_for(sqs, pair.dlq_arn, lambda t: t["Status"] != "RUNNING")
    assert (failed["Status"], failed["FailureReason"]) == (
        "FAILED",
        "AWS.SimpleQueueService.NonExistentQueue",
    )
    assert counts(sqs, pair.dlq_url) == (5 - failed["ApproximateNumberOfMessagesMoved"], 0)


# -- refusals -----------------------------------------------------------------------------------------


def test_a_source_that_is_no_queues_dlq_is_refused_as_aws_refuses_it(sqs: Any) -> None:
    pair = redrive_pair(sqs)
    assert error(lambda: sqs.start_message_move_task(SourceArn=pair.source_arn)) == (
        "InvalidParameterValue",
        "Source queue must be configured as a Dead Letter Queue.",
        400,
    )
    assert sqs.list_message_move_tasks(SourceArn=pair.source_arn)["Results"] == []


def test_missing_queues_and_unreadable_handles_get_awss_answers(sqs: Any) -> None:
    pair = redrive_pair(sqs)
    missing = _arn("no-such-queue")
    assert error(lambda: sqs.start_message_move_task(SourceArn=missing)) == (
        "ResourceNotFoundException",
        "The resource that you specified for the SourceArn parameter doesn't exist.",
        404,
    )
    assert error(lambda: sqs.start_message_move_task(SourceArn=pair.dlq_arn, DestinationArn=missing)) == (
        "ResourceNotFoundException",
        "The resource that you specified for the DestinationArn parameter doesn't exist.",
        404,
    )
    assert error(lambda: sqs.list_message_move_tasks(SourceArn=missing))[0] == "ResourceNotFoundException"
    assert error(lambda: sqs.cancel_message_move_task(TaskHandle="not-a-handle")) == (
        "InvalidParameterValue",
        "Value for parameter TaskHandle is invalid.",
        400,
    )
    unknown = json.dumps({"taskId": str(uuid.uuid4()), "sourceArn": pair.dlq_arn}).encode()
    assert error(lambda: sqs.cancel_message_move_task(TaskHandle=base64.b64encode(unknown).decode())) == (
        "ResourceNotFoundException",
        "Task does not exist.",
        404,
    )
    # Not recorded from AWS: the range check of the rate (the documented maximum is 500).
    code, message, _ = error(
        lambda: sqs.start_message_move_task(SourceArn=pair.dlq_arn, MaxNumberOfMessagesPerSecond=501)
    )
    assert code == "InvalidParameterValue" and "MaxNumberOfMessagesPerSecond" in message


# -- queue ages ---------------------------------------------------------------------------------------


def test_the_ages_endpoint_reports_the_oldest_age_and_receives_nothing(sqs: Any, endpoint: str) -> None:
    from moto.sqs.models import sqs_backends

    name = f"ages-{uuid.uuid4().hex[:8]}"
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    empty = sqs.create_queue(QueueName=f"{name}-empty")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="taken")
    taken = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=60)["Messages"][0]
    for body in ("oldest", "newer"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=60)
    queue = sqs_backends[ACCOUNT_ID][REGION].queues[name]
    backdated = {"oldest": 90_000, "taken": 30_000, "later": 600_000}  # ms before now
    messages: list[Any] = queue._messages
    for message in messages:
        message.sent_timestamp -= backdated.get(message.body, 0)

    for _ in range(3):
        ages = sqs_admin.queue_ages(endpoint)

    age = ages[url]
    assert (age.name, age.arn) == (name, _arn(name))
    assert (age.visible, age.in_flight, age.delayed) == (2, 1, 1)
    assert age.oldest_age_seconds is not None and 90 <= age.oldest_age_seconds < 100  # not the delayed one
    assert (ages[empty].visible, ages[empty].oldest_age_seconds) == (0, None)
    # Receive counts and visibility are as they were: the in-flight one is still in flight, and
    # receiving now counts the first receive of the others and the second of the one taken before.
    assert counts(sqs, url) == (2, 1)
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=taken["ReceiptHandle"], VisibilityTimeout=0)
    received = {m["Body"]: m["Attributes"]["ApproximateReceiveCount"] for m in receive_all(sqs, url)}
    assert received == {"taken": "2", "oldest": "1", "newer": "1"}


def test_the_emulator_process_serves_redrive_and_queue_ages() -> None:
    """The wiring: the emulator's moto process installs patch 10 (before patch 4 caches the handlers'
    methods) and the ages endpoint, under the IAM enforcement."""
    from emulator.server import Emulator, client

    emulator = Emulator(free_port())
    emulator.start()
    try:
        sqs = client("sqs", emulator.endpoint)
        pair = redrive_pair(sqs)
        dead_letter_by_redrive_policy(sqs, pair, 1)
        assert sqs_admin.queue_ages(emulator.endpoint)[pair.dlq_url].visible == 1
        sqs.start_message_move_task(SourceArn=pair.dlq_arn)
        assert wait_for(sqs, pair.dlq_arn, lambda t: t["Status"] != "RUNNING")["Status"] == "COMPLETED"
        ages = sqs_admin.queue_ages(emulator.endpoint)
        assert (ages[pair.dlq_url].visible, ages[pair.source_url].visible) == (0, 1)
    finally:
        emulator.stop()
