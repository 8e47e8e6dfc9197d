"""The reports stack on moto, provisioned from its template (``tests.handlers.stack_world``): the
tables, the report-events topic with its filtered subscriptions and their queues with DLQs -- plus
delivery helpers that play the SQS event source mapping."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from relay.ddb import deserialize_item
from relay.envelope import Envelope
from relay.unwrap import envelope_from_sqs_record
from tests.builders import (
    FakeContext,
    envelope,
    failed_ids,  # noqa: F401  (re-exported to the tests)
    record_from_received,
    retry_copy,
    sns_wrapped,
    sqs_event,
    sqs_record,
)
from tests.handlers.stack_world import StackWorld, aws, plan, provision

VERIFIER = "reports.handlers.verifier.handler"
NOTIFIER = "reports.handlers.notifier.handler"
_PLAN = plan("reports")
VERIFICATIONS_TABLE = _PLAN.env()["VERIFICATIONS_TABLE"]
IDEMPOTENCY_TABLE = _PLAN.env()["IDEMPOTENCY_TABLE"]
VERIFIER_QUEUE = _PLAN.queue_for(VERIFIER)
NOTIFY_QUEUE = _PLAN.queue_for(NOTIFIER)
_TOPIC_ARN = _PLAN.subscription(_PLAN.consumers()[VERIFIER_QUEUE].arn).topic_arn
TOPIC = _PLAN.topic_name(_TOPIC_ARN)


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
    stack: StackWorld
    queues: dict[str, Queue] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        """The functions' environment from the template, with the test's overrides."""
        return self.stack.env()

    def consumer_env(self, queue: str) -> dict[str, str]:
        """What the function consuming ``queue`` sets on top of ``env()`` (RELAY_QUEUE_URL, ...)."""
        return self.stack.function_env(self.stack.consumers()[queue].function)

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

    def retry_copy(self, queue: str, of: Envelope, *, attempt: int = 1) -> dict[str, Any]:
        """The one delayed copy the consumer re-sent to ``queue`` to retry ``of`` after a transient
        failure (waiting out its DelaySeconds), asserted to be retry ``attempt`` of the same event."""
        copy = retry_copy(self.sqs, self.queues[queue].url, attempt=attempt)
        carried = envelope_from_sqs_record(record_from_received(copy, self.queues[queue].arn))
        assert carried.event_id == of.event_id, "the retry copy carries the event it retries"
        return copy

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


def create_world(overrides: dict[str, str] | None = None) -> ReportsWorld:
    """Call inside ``mock_aws``."""
    stack = provision("reports", overrides)
    consumers = stack.consumers()
    world = ReportsWorld(
        ddb=aws("dynamodb"),
        sqs=aws("sqs"),
        sns=aws("sns"),
        topic_arn=stack.topology.topics[_TOPIC_ARN.rsplit(":", 1)[-1]],
        stack=stack,
    )
    for name, consumer in consumers.items():
        world.queues[name] = Queue(consumer.url, consumer.arn, consumer.dlq_url)
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


def deliver(
    handler: Any,
    env: Envelope | str,
    *,
    queue: str,
    receive_count: int = 1,
    message_attributes: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One SQS delivery of ``env`` (SNS-wrapped, as the enveloped subscription delivers it), with
    ``message_attributes`` in the Lambda event format (e.g. a retry copy's ``relay.attempt``)."""
    body = sns_wrapped(env, topic=TOPIC) if isinstance(env, Envelope) else env
    record = sqs_record(body, queue=queue, receive_count=receive_count, message_attributes=message_attributes)
    result: dict[str, Any] = handler(sqs_event([record]), FakeContext())
    return result


def redeliver(handler: Any, world: ReportsWorld, queue: str, message: dict[str, Any]) -> dict[str, Any]:
    """Deliver ``message`` (a ReceiveMessage result, e.g. a retry copy) from ``queue`` as the event
    source mapping would."""
    result: dict[str, Any] = handler(
        sqs_event([record_from_received(message, world.queues[queue].arn)]), FakeContext()
    )
    return result


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
