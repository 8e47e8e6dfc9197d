"""Queue consumer: a Lambda function wired to a reliable queue the only safe way.

Defaults it owns (each has one infra test named after it):
- the SQS event source ALWAYS sets `ReportBatchItemFailures` — without it Lambda ignores the
  `batchItemFailures` the kernel returns and deletes or retries the whole batch;
- batch size, batching window and maximum concurrency come from the stage's `consumers` settings (FIFO:
  at most `FIFO_MAX_BATCH_SIZE`, no window);
- the queue's visibility timeout is raised to at least `VISIBILITY_FACTOR` (6) × the function timeout (AWS
  guidance: a batch that is retried by Lambda's poller must not become visible again while a previous
  attempt still runs);
- transient failures are retried for a TIME budget, not a number of receives: on a standard queue the
  kernel re-sends a failed message to its own queue with a delay (`relay.retry`) until
  `retry_budget` (default: the stage's `consumers.retry_budget_seconds`, 1 hour) is spent, then parks
  it with the reason; the budget is refused at synth unless it is shorter than the queue's retention
  (a message retried in place, when a re-send is refused, must not expire before it is parked).
  FIFO queues cannot delay one message, so their consumers retry in place until `maxReceiveCount`;
- everything a `RelayFunction` owns (runtime, layers, log group, own role);
- least privilege: consuming its own queue, sending to it (the retry copies; standard queues only), and
  sending to its own DLQ (parking) only.
Its errors alarm is `ServiceMonitoring`'s, given this consumer by the stack.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda_event_sources as sources
from constructs import Construct

from infra.constructs.defaults import (
    FIFO_MAX_BATCH_SIZE,
    MAX_RETRY_BUDGET_SECONDS,
    MIN_RETRY_BUDGET_SECONDS,
    VISIBILITY_FACTOR,
)
from infra.constructs.function import FunctionSettings, RelayFunction
from infra.constructs.reliable_queue import ReliableQueue
from relay import consumer_env

# What SQS keeps a message for when a queue does not say (ReliableQueue always does).
SQS_DEFAULT_RETENTION_SECONDS = 4 * 86_400


class QueueConsumer(RelayFunction):
    """`QueueConsumer(self, "Worker", settings=functions, queue=rq, handler="payments.worker.handler")`;
    `settings` is the stack's `FunctionSettings`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: FunctionSettings,
        queue: ReliableQueue,
        handler: str,
        environment: dict[str, str] | None = None,
        timeout: Duration | None = None,
        memory_mb: int | None = None,
        batch_size: int | None = None,
        backoff_base_seconds: int | None = None,
        retry_budget: Duration | None = None,
        description: str | None = None,
    ) -> None:
        # The kernel consumer's own settings (relay.consumer.ConsumerSettings); ``backoff_base_seconds``
        # is the first delay of a transient failure's back-off (kernel default 2 s).
        kernel = {consumer_env.QUEUE_URL: queue.queue.queue_url, consumer_env.DLQ_URL: queue.dlq.queue_url}
        if backoff_base_seconds is not None:
            kernel[consumer_env.BACKOFF_BASE_SECONDS] = str(backoff_base_seconds)
        # FIFO queues refuse a per-message DelaySeconds: no budget, the kernel retries them in place.
        budget = (
            None if queue.fifo else _retry_budget_seconds(scope, construct_id, queue, retry_budget, settings)
        )
        if budget is not None:
            kernel[consumer_env.RETRY_BUDGET_SECONDS] = str(budget)
        super().__init__(
            scope,
            construct_id,
            settings=settings,
            handler=handler,
            environment={**kernel, **(environment or {})},
            timeout=timeout,
            memory_mb=memory_mb,
            description=description,
        )
        consumers = settings.consumers
        self.queue = queue
        visibility = queue.ensure_visibility_timeout_at_least(
            VISIBILITY_FACTOR * int(self.timeout.to_seconds())
        )
        # The kernel's heartbeat extends a long-running message by this much each time.
        self.function.add_environment(consumer_env.VISIBILITY_TIMEOUT_SECONDS, str(visibility))

        window = consumers.batching_window_seconds
        fifo_batch = min(consumers.batch_size, FIFO_MAX_BATCH_SIZE)
        self.event_source = sources.SqsEventSource(
            queue.queue,
            batch_size=batch_size or (fifo_batch if queue.fifo else consumers.batch_size),
            # FIFO queues do not accept a batching window.
            max_batching_window=None if queue.fifo or window == 0 else Duration.seconds(window),
            max_concurrency=max_concurrency(scope, construct_id, consumers),
            report_batch_item_failures=True,
        )
        self.function.add_event_source(self.event_source)
        # Parking: a permanent failure is sent to the DLQ at once with its reason, and recorded once in
        # the app's parked ledger (relay.ledger): PutItem, and GetItem to find that a delivery was
        # parked already (a poison message delivered twice is parked once); nothing else on that table.
        queue.dlq.grant_send_messages(self.function)
        if settings.parked_ledger is not None:
            self.function.add_environment(consumer_env.PARKED_LEDGER_TABLE, settings.parked_ledger.table_name)
            # The table only (Table.grant would add its index ARNs too, which these never need).
            self.function.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["dynamodb:GetItem", "dynamodb:PutItem"],
                    resources=[settings.parked_ledger.table_arn],
                )
            )
        if budget is not None:
            # Retry copies: a transient failure is re-sent to this very queue with DelaySeconds (and the
            # original deleted), so the retries are bounded by the budget, not by maxReceiveCount.
            queue.queue.grant_send_messages(self.function)


def _retry_budget_seconds(
    scope: Construct,
    construct_id: str,
    queue: ReliableQueue,
    retry_budget: Duration | None,
    settings: FunctionSettings,
) -> int:
    """The budget in seconds, checked against the Relay rules and the queue's retention."""
    path = f"{scope.node.path}/{construct_id}"
    budget = (
        settings.consumers.retry_budget_seconds if retry_budget is None else int(retry_budget.to_seconds())
    )
    if not MIN_RETRY_BUDGET_SECONDS <= budget <= MAX_RETRY_BUDGET_SECONDS:
        raise ValueError(
            f"{path}: retry budget {budget} s is outside {MIN_RETRY_BUDGET_SECONDS}.."
            f"{MAX_RETRY_BUDGET_SECONDS} s (under a minute parks healthy messages on a blip; the maximum "
            "keeps it under SQS's 14-day retention)"
        )
    retention = queue.cfn_queue.message_retention_period
    retention_seconds = retention if isinstance(retention, int | float) else SQS_DEFAULT_RETENTION_SECONDS
    if budget >= retention_seconds:
        raise ValueError(
            f"{path}: retry budget {budget} s is not shorter than the retention of queue {queue.name!r} "
            f"({int(retention_seconds)} s): a message retried in place (when its delayed re-send is refused) "
            "would expire before it is parked. Lower the budget (consumers.retry_budget_seconds or "
            "retry_budget=) or raise queues.retention_days."
        )
    return budget


def consumer_name(scope: Construct, construct_id: str) -> str:
    """``<service>.<ConstructId>``: how the stage config names one (``max_concurrency_by_consumer``)."""
    stack = Stack.of(scope)
    return f"{getattr(stack, 'service', stack.stack_name)}.{construct_id}"


def max_concurrency(scope: Construct, construct_id: str, consumers: Any) -> int:
    """The consumer's own cap from the stage config, else every consumer's."""
    name = consumer_name(scope, construct_id)
    return int(consumers.max_concurrency_by_consumer.get(name, consumers.max_concurrency))
