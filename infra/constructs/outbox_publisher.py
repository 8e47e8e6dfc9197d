"""Outbox publisher: a table's stream → a fan-out topic, the second half of the transactional outbox.

Defaults it owns (values and reasons in `defaults.OUTBOX_STREAM`):
- the stream mapping starts at TRIM_HORIZON (no outbox row written before the first deploy is
  skipped) and reports batch item failures by SequenceNumber;
- a failing batch is retried in order (20 attempts), then its stream coordinates go to an on-failure
  DLQ (`dead_letter_queues`, alarmed by `ServiceMonitoring`) — the outbox rows themselves stay
  unpublished in the table, ready for a re-drive;
- `defaults.OUTBOX_STREAM.parallelization_factor` concurrent batches per shard: records stay in order per
  partition key -- one aggregate's events are published in the order they were written -- while a slow publish
  for one aggregate no longer holds up every other one behind it on the shard;
- its own role: publish to this topic, write (mark `publishedAt`) to this table, read this stream.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Duration, Validations
from aws_cdk import aws_dynamodb as ddb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import QueueSettings
from infra.constructs import defaults
from infra.constructs.fanout_topic import FanoutTopic
from infra.constructs.function import FunctionSettings, RelayFunction
from infra.constructs.naming import Naming
from infra.constructs.reliable_queue import dead_letter_queue

PARALLELIZATION_FACTOR = defaults.OUTBOX_STREAM.parallelization_factor
STREAM_DLQ_NAME = "outbox-stream-dlq"


class OutboxPublisher(RelayFunction):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: FunctionSettings,
        naming: Naming,
        queues: QueueSettings,
        table: ddb.ITable,
        topic: FanoutTopic,
        handler: str,
        environment: dict[str, str] | None = None,
    ) -> None:
        """`naming` and `queues` are for the on-failure DLQ (kept per `settings.removal_policy`)."""
        super().__init__(
            scope,
            construct_id,
            settings=settings,
            handler=handler,
            environment=environment,
            description=f"{table.node.id} stream → {topic.name} (outbox rows only)",
        )
        stream = defaults.OUTBOX_STREAM
        self.dlq = dead_letter_queue(
            self,
            "StreamDlq",
            name=STREAM_DLQ_NAME,
            naming=naming,
            settings=queues,
            removal_policy=settings.removal_policy,
        )
        self.function.add_event_source(
            sources.DynamoEventSource(
                table,
                starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                batch_size=stream.batch_size,
                max_batching_window=Duration.seconds(stream.batching_window_seconds),
                report_batch_item_failures=True,
                retry_attempts=stream.retry_attempts,
                bisect_batch_on_error=False,
                parallelization_factor=stream.parallelization_factor,
                on_failure=sources.SqsDlq(self.dlq),
            )
        )
        topic.topic.grant_publish(self.function)
        table.grant_write_data(self.function)
        Validations.of(self.role).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM5[Resource::*]",
                reason="dynamodb:ListStreams does not support resource-level permissions (AWS service "
                "authorization reference); every other stream action is scoped to this table's stream.",
            )
        )

    @property
    def dead_letter_queues(self) -> dict[str, sqs.IQueue]:
        return {STREAM_DLQ_NAME: self.dlq}
