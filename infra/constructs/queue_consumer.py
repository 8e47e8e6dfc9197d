"""Queue consumer: a Lambda function wired to a reliable queue the only safe way.

Defaults it owns (each has one infra test named after it):
- the SQS event source ALWAYS sets `ReportBatchItemFailures` — without it Lambda ignores the
  `batchItemFailures` the kernel returns and deletes or retries the whole batch;
- batch size, batching window and maximum concurrency come from the stage's `consumers` settings (FIFO:
  at most `FIFO_MAX_BATCH_SIZE`, no window);
- the queue's visibility timeout is raised to at least `VISIBILITY_FACTOR` (6) × the function timeout (AWS
  guidance: a batch that is retried by Lambda's poller must not become visible again while a previous
  attempt still runs);
- everything a `RelayFunction` owns (runtime, layers, log group, own role);
- least privilege: consuming its own queue and sending to its own DLQ (parking) only.
Its errors alarm is `ServiceMonitoring`'s, given this consumer by the stack.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_lambda_event_sources as sources
from constructs import Construct

from infra.constructs.defaults import FIFO_MAX_BATCH_SIZE, VISIBILITY_FACTOR
from infra.constructs.function import FunctionSettings, RelayFunction
from infra.constructs.reliable_queue import ReliableQueue
from relay import consumer_env


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
        description: str | None = None,
    ) -> None:
        # The kernel consumer's own settings (relay.consumer.ConsumerSettings); ``backoff_base_seconds``
        # is the first delay of a transient failure's back-off (kernel default 2 s).
        kernel = {consumer_env.QUEUE_URL: queue.queue.queue_url, consumer_env.DLQ_URL: queue.dlq.queue_url}
        if backoff_base_seconds is not None:
            kernel[consumer_env.BACKOFF_BASE_SECONDS] = str(backoff_base_seconds)
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
            max_concurrency=consumers.max_concurrency,
            report_batch_item_failures=True,
        )
        self.function.add_event_source(self.event_source)
        # Parking: a permanent failure is sent to the DLQ at once with its reason.
        queue.dlq.grant_send_messages(self.function)
