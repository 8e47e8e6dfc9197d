"""The moto world the kernel's handler tests run in (see the ``aws`` fixture in conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from moto import mock_aws

from relay.consumer import ConsumerSettings
from tests.handlers.stack_world import aws as aws_client
from tests.handlers.stack_world import provision


@dataclass
class Aws:
    sqs: Any
    ddb: Any
    sns: Any
    s3: Any
    queue_url: str
    queue_arn: str
    dlq_url: str
    table: str
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


# The kernel is exercised where the stacks run it: a queue a function consumes (with the DLQ its
# redrive policy and RELAY_DLQ_URL point at) and that function's idempotency table.
CONSUMER = ("reports", "reports.handlers.notifier.handler")


@contextmanager
def moto_world() -> Iterator[Aws]:
    """A consumer queue of the reports stack (redrive to its DLQ, as every reliable queue), the
    consumer's idempotency table (partition key ``id``, which the tests also use for business
    items), both provisioned from the template, and a counter of DynamoDB requests."""
    service, handler = CONSUMER
    with mock_aws():
        stack = provision(service)
        consumer = stack.consumers()[stack.queue_for(handler)]
        ddb = aws_client("dynamodb")
        env = Aws(
            sqs=aws_client("sqs"),
            ddb=ddb,
            sns=aws_client("sns"),
            s3=aws_client("s3"),
            queue_url=consumer.url,
            queue_arn=consumer.arn,
            dlq_url=consumer.dlq_url,
            table=consumer.function.environment["IDEMPOTENCY_TABLE"],
        )

        def count(request: Any, **_: Any) -> None:
            target = request.headers["X-Amz-Target"]
            env.ddb_requests.append(target.decode() if isinstance(target, bytes) else target)

        # Counts HTTP sends (retries included), i.e. what DynamoDB bills and throttles. The client is
        # the session's (stack_world.aws), so the hook goes when the world does.
        ddb.meta.events.register("before-send.dynamodb.*", count)
        try:
            yield env
        finally:
            ddb.meta.events.unregister("before-send.dynamodb.*", count)
