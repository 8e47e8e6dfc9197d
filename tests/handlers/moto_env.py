"""The moto world handler tests run in (see the ``aws`` fixture in conftest.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3
from moto import mock_aws

from relay.consumer import ConsumerSettings


@dataclass
class Aws:
    sqs: Any
    ddb: Any
    sns: Any
    s3: Any
    queue_url: str
    queue_arn: str
    dlq_url: str
    table: str = "relay-table"
    ddb_requests: list[str] = field(default_factory=list)

    @property
    def settings(self) -> ConsumerSettings:
        return ConsumerSettings(queue_url=self.queue_url, dlq_url=self.dlq_url, backoff_base_seconds=2)

    def item(self, key: str) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self.ddb.get_item(TableName=self.table, Key={"id": {"S": key}}).get(
            "Item"
        )
        return item

    def dlq_messages(self) -> list[dict[str, Any]]:
        return list(
            self.sqs.receive_message(
                QueueUrl=self.dlq_url,
                MaxNumberOfMessages=10,
                MessageAttributeNames=["All"],
                AttributeNames=["All"],
            ).get("Messages", [])
        )

    def queue_depth(self) -> int:
        attrs = self.sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["All"])["Attributes"]
        return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])


@contextmanager
def moto_world() -> Iterator[Aws]:
    """A source queue with a redrive policy (maxReceiveCount 5) to its DLQ, an idempotency/state
    table (partition key ``id``), and a counter of DynamoDB requests (botocore event hook)."""
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        dlq_url = sqs.create_queue(QueueName="relay-dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        queue_url = sqs.create_queue(
            QueueName="relay-queue",
            Attributes={
                "VisibilityTimeout": "30",
                "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "5"}),
            },
        )["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(
            TableName="relay-table",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        env = Aws(
            sqs=sqs,
            ddb=ddb,
            sns=boto3.client("sns", region_name="us-east-1"),
            s3=boto3.client("s3", region_name="us-east-1"),
            queue_url=queue_url,
            queue_arn=queue_arn,
            dlq_url=dlq_url,
        )

        def count(request: Any, **_: Any) -> None:
            target = request.headers["X-Amz-Target"]
            env.ddb_requests.append(target.decode() if isinstance(target, bytes) else target)

        # Counts HTTP sends (retries included), i.e. what DynamoDB bills and throttles.
        ddb.meta.events.register("before-send.dynamodb.*", count)
        yield env
