"""Patch 14 (``emulator.patches.firehose_delivery``): SNS's deliveries to a Firehose subscription, and
the S3 objects Firehose writes, with and without the patch; and its IAM questions, as the enforcer
answers them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from emulator.patches import firehose_delivery
from emulator.patches.firehose_delivery import evaluate_prefix
from tests.sandbox.patches.support import installed

ACCOUNT = "123456789012"
SUBSCRIBER_ROLE = f"arn:aws:iam::{ACCOUNT}:role/sns-archive"
STREAM_ROLE = f"arn:aws:iam::{ACCOUNT}:role/firehose-archive"
DELIMITED = {"Enabled": True, "Processors": [{"Type": "AppendDelimiterToRecord"}]}


@contextmanager
def archive(
    *, raw: bool = True, filter_policy: dict[str, Any] | None = None, processing: dict[str, Any] | None = None
) -> Iterator[dict[str, Any]]:
    """A topic subscribed (raw) to a Direct PUT stream that writes under events/dt=<day>/ of a bucket,
    with a subscription DLQ."""
    with mock_aws():
        sns, sqs = boto3.client("sns", region_name="us-east-1"), boto3.client("sqs", region_name="us-east-1")
        s3, firehose = (
            boto3.client("s3", region_name="us-east-1"),
            boto3.client("firehose", region_name="us-east-1"),
        )
        s3.create_bucket(Bucket="archive")
        stream = firehose.create_delivery_stream(
            DeliveryStreamName="analytics",
            DeliveryStreamType="DirectPut",
            ExtendedS3DestinationConfiguration={
                "RoleARN": STREAM_ROLE,
                "BucketARN": "arn:aws:s3:::archive",
                "Prefix": "events/dt=!{timestamp:yyyy-MM-dd}/",
                "ErrorOutputPrefix": "errors/!{firehose:error-output-type}/",
                "ProcessingConfiguration": processing if processing is not None else DELIMITED,
            },
        )["DeliveryStreamARN"]
        topic = sns.create_topic(Name="order-events")["TopicArn"]
        dlq = sqs.create_queue(QueueName="undeliverable")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        attributes = {
            "RawMessageDelivery": str(raw).lower(),
            "SubscriptionRoleArn": SUBSCRIBER_ROLE,
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn}),
        }
        if filter_policy is not None:
            attributes["FilterPolicy"] = json.dumps(filter_policy)
        sns.subscribe(TopicArn=topic, Protocol="firehose", Endpoint=stream, Attributes=attributes)
        yield {"sns": sns, "sqs": sqs, "s3": s3, "firehose": firehose, "topic": topic, "dlq": dlq}


def _objects(s3: Any) -> dict[str, bytes]:
    listing = s3.list_objects_v2(Bucket="archive").get("Contents", [])
    return {o["Key"]: s3.get_object(Bucket="archive", Key=o["Key"])["Body"].read() for o in listing}


def _publish(world: dict[str, Any], body: str, event_type: str = "OrderCreated") -> None:
    world["sns"].publish(
        TopicArn=world["topic"],
        Message=body,
        MessageAttributes={"eventType": {"DataType": "String", "StringValue": event_type}},
    )


def test_without_the_patch_moto_drops_what_sns_should_deliver_to_firehose() -> None:
    with archive() as world:
        _publish(world, '{"eventId":"e-1"}')
        assert _objects(world["s3"]) == {}


def test_with_the_patch_each_message_is_one_line_under_the_evaluated_prefix() -> None:
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    with installed(firehose_delivery.install), archive() as world:
        _publish(world, '{"eventId":"e-1"}')
        _publish(world, '{"eventId":"e-2"}')
        objects = _objects(world["s3"])
    assert sorted(objects.values()) == [b'{"eventId":"e-1"}\n', b'{"eventId":"e-2"}\n']
    for key in objects:
        assert key.startswith(f"events/dt={day}/analytics-1-{day}-")  # stream-version-time-uuid


def test_without_the_delimiter_processor_firehose_concatenates_records_as_they_came() -> None:
    with installed(firehose_delivery.install), archive(processing={}) as world:
        _publish(world, '{"eventId":"e-1"}')
        assert list(_objects(world["s3"]).values()) == [b'{"eventId":"e-1"}']


def test_a_filter_policy_and_raw_delivery_apply_as_for_queues() -> None:
    with installed(firehose_delivery.install), archive(filter_policy={"eventType": ["OrderPaid"]}) as world:
        _publish(world, '{"eventId":"e-1"}', event_type="OrderCreated")
        _publish(world, '{"eventId":"e-2"}', event_type="OrderPaid")
        assert list(_objects(world["s3"]).values()) == [b'{"eventId":"e-2"}\n']
    with installed(firehose_delivery.install), archive(raw=False) as world:
        _publish(world, '{"eventId":"e-3"}')
        (line,) = _objects(world["s3"]).values()
        notification = json.loads(line)
        assert notification["Type"] == "Notification" and notification["Message"] == '{"eventId":"e-3"}'


def test_what_sns_cannot_deliver_goes_to_the_subscription_dlq() -> None:
    with installed(firehose_delivery.install), archive() as world:
        world["firehose"].delete_delivery_stream(DeliveryStreamName="analytics")
        _publish(world, '{"eventId":"e-1"}')
        parked = world["sqs"].receive_message(QueueUrl=world["dlq"], MaxNumberOfMessages=10)["Messages"]
        assert [m["Body"] for m in parked] == ['{"eventId":"e-1"}']


def test_the_iam_questions_go_to_the_role_check_and_a_denial_writes_nothing() -> None:
    asked: list[tuple[str, str, str, str]] = []

    def deny_s3(service: str, role: str, source: str, action: str, resource: str) -> bool:
        asked.append((service, role, action, resource.split("/", 1)[0]))
        return not action.startswith("s3:")

    firehose_delivery.ROLE_CHECK = deny_s3
    try:
        with installed(firehose_delivery.install), archive() as world:
            _publish(world, '{"eventId":"e-1"}')
            assert _objects(world["s3"]) == {}
            assert world["sqs"].receive_message(QueueUrl=world["dlq"]).get("Messages") is None
    finally:
        firehose_delivery.ROLE_CHECK = None
    assert asked == [
        (
            "sns.amazonaws.com",
            SUBSCRIBER_ROLE,
            "firehose:PutRecord",
            f"arn:aws:firehose:us-east-1:{ACCOUNT}:deliverystream",
        ),
        (
            "sns.amazonaws.com",
            SUBSCRIBER_ROLE,
            "firehose:PutRecordBatch",
            f"arn:aws:firehose:us-east-1:{ACCOUNT}:deliverystream",
        ),
        ("firehose.amazonaws.com", STREAM_ROLE, "s3:PutObject", "arn:aws:s3:::archive"),
    ]


def test_a_subscription_role_sns_may_not_use_parks_the_message() -> None:
    firehose_delivery.ROLE_CHECK = lambda service, role, source, action, resource: (
        service != "sns.amazonaws.com"
    )
    try:
        with installed(firehose_delivery.install), archive() as world:
            _publish(world, '{"eventId":"e-1"}')
            assert _objects(world["s3"]) == {}
            parked = world["sqs"].receive_message(QueueUrl=world["dlq"])["Messages"]
            assert [m["Body"] for m in parked] == ['{"eventId":"e-1"}']
    finally:
        firehose_delivery.ROLE_CHECK = None


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("events/dt=!{timestamp:yyyy-MM-dd}/", "events/dt=2026-12-06/"),
        ("logs/!{timestamp:yyyy}/!{timestamp:MM}/!{timestamp:dd}/!{timestamp:HH}/", "logs/2026/12/06/07/"),
        ("events/", "events/2026/12/06/07/"),  # no expression: Firehose's own YYYY/MM/DD/HH/
        ("errors/!{firehose:error-output-type}/", "errors/processing-failed/"),
    ],
)
def test_prefix_expressions_evaluate_as_firehose_documents(prefix: str, expected: str) -> None:
    now = datetime(2026, 12, 6, 7, 5, 9, tzinfo=UTC)
    assert evaluate_prefix(prefix, now, error_output_type="processing-failed") == expected


def test_an_unknown_firehose_expression_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown Firehose prefix expression"):
        evaluate_prefix("x/!{firehose:nope}/", datetime.now(UTC))
