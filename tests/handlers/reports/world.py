"""What the reports stack deploys, on moto: the tables, the report-events topic with its two
filtered subscriptions (enveloped delivery) and their queues with DLQs -- plus delivery helpers
that play the SQS event source mapping."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3

from relay.envelope import Envelope
from relay.idempotency import deserialize_item
from tests.builders import FakeContext, envelope, record_from_received, sns_wrapped, sqs_event, sqs_record

REGION = "us-east-1"
VERIFICATIONS_TABLE = "reports-verifications"
IDEMPOTENCY_TABLE = "reports-idempotency"
TOPIC = "report-events"
VERIFIER_QUEUE = "verifier"
NOTIFY_QUEUE = "report-notifications"


@dataclass
class Queue:
    url: str
    arn: str
    dlq_url: str


@dataclass
class ReportsWorld:
    ddb: Any
    sqs: Any
    sns: Any
    topic_arn: str
    queues: dict[str, Queue] = field(default_factory=dict)

    def consumer_env(self, queue: str) -> dict[str, str]:
        q = self.queues[queue]
        return {"RELAY_QUEUE_URL": q.url, "RELAY_DLQ_URL": q.dlq_url}

    def verification(self, report_id: str) -> dict[str, Any] | None:
        item = self.ddb.get_item(
            TableName=VERIFICATIONS_TABLE,
            Key={"pk": {"S": f"REPORT#{report_id}"}, "sk": {"S": "VERIFICATION"}},
        ).get("Item")
        return deserialize_item(item) if item else None

    def verification_count(self) -> int:
        return int(self.ddb.scan(TableName=VERIFICATIONS_TABLE, Select="COUNT")["Count"])

    def parked(self, queue: str) -> list[dict[str, Any]]:
        return list(
            self.sqs.receive_message(
                QueueUrl=self.queues[queue].dlq_url,
                MaxNumberOfMessages=10,
                MessageAttributeNames=["All"],
            ).get("Messages", [])
        )

    def publish(self, env: Envelope) -> None:
        """Publish as the producer does: the envelope, with eventType as a message attribute."""
        self.sns.publish(
            TopicArn=self.topic_arn,
            Message=env.to_json(),
            MessageAttributes={"eventType": {"DataType": "String", "StringValue": env.event_type}},
        )

    def lambda_event(self, queue: str) -> dict[str, Any]:
        """Receive what the queue holds and shape it as the event source mapping would."""
        q = self.queues[queue]
        messages = self.sqs.receive_message(
            QueueUrl=q.url, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"]
        ).get("Messages", [])
        return sqs_event(record_from_received(m, q.arn) for m in messages)


def create_world() -> ReportsWorld:
    """Call inside ``mock_aws``."""
    ddb = boto3.client("dynamodb", region_name=REGION)
    sqs = boto3.client("sqs", region_name=REGION)
    sns = boto3.client("sns", region_name=REGION)
    ddb.create_table(
        TableName=VERIFICATIONS_TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.create_table(
        TableName=IDEMPOTENCY_TABLE,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    topic_arn = sns.create_topic(Name=TOPIC)["TopicArn"]
    world = ReportsWorld(ddb=ddb, sqs=sqs, sns=sns, topic_arn=topic_arn)
    for name in (VERIFIER_QUEUE, NOTIFY_QUEUE):
        dlq_url = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        url = sqs.create_queue(
            QueueName=name,
            Attributes={
                "VisibilityTimeout": "30",
                "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 5}),
            },
        )["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(
            TopicArn=topic_arn,
            Protocol="sqs",
            Endpoint=arn,
            Attributes={
                "FilterPolicy": json.dumps({"eventType": ["ReportGenerated"]}),
                "RawMessageDelivery": "false",
            },
        )
        world.queues[name] = Queue(url, arn, dlq_url)
    return world


def report_generated(
    report_id: str = "r-1",
    *,
    agent_id: str = "agent-a",
    sha256: str,
    url: str | None = None,
    occurred_at: datetime | None = None,
    identity: list[str] | None = None,
) -> Envelope:
    payload: dict[str, Any] = {"reportId": report_id, "agentId": agent_id, "sha256": sha256}
    if url is not None:
        payload["url"] = url
    return envelope(
        "ReportGenerated",
        identity=identity or [report_id],
        ids={"reportId": report_id, "agentId": agent_id},
        payload=payload,
        occurred_at=occurred_at or datetime.now(UTC),
    )


def deliver(handler: Any, env: Envelope | str, *, queue: str, receive_count: int = 1) -> dict[str, Any]:
    """One SQS delivery of ``env`` (SNS-wrapped, as the enveloped subscription delivers it)."""
    body = sns_wrapped(env, topic=TOPIC) if isinstance(env, Envelope) else env
    result: dict[str, Any] = handler(
        sqs_event([sqs_record(body, queue=queue, receive_count=receive_count)]), FakeContext()
    )
    return result


def failed_ids(response: dict[str, Any]) -> list[str]:
    return [f["itemIdentifier"] for f in response.get("batchItemFailures", [])]


def metric_lines(text: str, name: str) -> list[dict[str, Any]]:
    """The EMF documents printed for metric ``name``."""
    found = []
    for line in text.splitlines():
        if not line.startswith("{") or f'"{name}"' not in line:
            continue
        document = json.loads(line)
        if "_aws" in document and name in document:
            found.append(document)
    return found
