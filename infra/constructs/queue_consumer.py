"""Queue consumer: a Lambda function wired to a reliable queue the only safe way.

Defaults it owns (each has one infra test named after it):
- the SQS event source ALWAYS sets `ReportBatchItemFailures` — without it Lambda ignores the
  `batchItemFailures` the kernel returns and deletes or retries the whole batch;
- batch size, batching window and maximum concurrency come from the stage config;
- the queue's visibility timeout is raised to at least 6 × the function timeout (AWS guidance: a batch
  that is retried by Lambda's poller must not become visible again while a previous attempt still runs);
- Python (the version CI tests on: `infra/constructs/layers.py`), arm64, kernel + dependency layers,
  a log group with retention, Powertools service/namespace/log level from config;
- least privilege: its own role, consuming its own queue and sending to its own DLQ (parking) only.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.constructs.base import RelayStack
from infra.constructs.layers import ARCHITECTURE, RUNTIME
from infra.constructs.reliable_queue import ReliableQueue

ROOT = Path(__file__).resolve().parents[2]
VISIBILITY_FACTOR = 6

_RETENTION = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
}


def log_retention(days: int) -> logs.RetentionDays:
    """The largest CloudWatch retention step not above `days`."""
    return _RETENTION[max(d for d in _RETENTION if d <= days)]


def function_code(service: str) -> lambda_.Code:
    """One code asset per service: `functions/<service>/` is packaged as the `<service>` package."""
    return lambda_.Code.from_asset(
        str(ROOT / "functions"),
        exclude=["*", f"!{service}", f"!{service}/**", "**/__pycache__", "**/*.pyc"],
    )


class RelayFunction(Construct):
    """A Lambda function with Relay's runtime defaults and its own least-privilege role."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler: str,
        environment: dict[str, str] | None = None,
        timeout: Duration | None = None,
        memory_mb: int | None = None,
        description: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = RelayStack.of(self)
        defaults = stack.config.consumers
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=log_retention(defaults.log_retention_days),
            removal_policy=RemovalPolicy.DESTROY,
        )
        # Its own role instead of AWSLambdaBasicExecutionRole: logs only to its own log group.
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        self.log_group.grant_write(self.role)
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=handler,
            code=function_code(stack.service),
            layers=stack.platform.layers,
            role=self.role,
            log_group=self.log_group,
            timeout=timeout or Duration.seconds(defaults.timeout_seconds),
            memory_size=memory_mb or defaults.memory_mb,
            description=description,
            environment={
                "POWERTOOLS_SERVICE_NAME": stack.service,
                "POWERTOOLS_METRICS_NAMESPACE": stack.config.metrics_namespace,
                "POWERTOOLS_LOG_LEVEL": defaults.log_level,
                "RELAY_STAGE": stack.config.stage,
                **(environment or {}),
            },
        )
        Validations.of(self.function).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-L1",
                reason="Functions run python3.13, the Python the whole test suite runs on (the Makefile "
                "builds .venv with it, and a test fails when the two drift apart); a newer runtime would "
                "deploy code that no test has run.",
            )
        )


class QueueConsumer(RelayFunction):
    """`QueueConsumer(self, "PaymentWorker", queue=rq, handler="payments.payment_worker.handler")`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        queue: ReliableQueue,
        handler: str,
        environment: dict[str, str] | None = None,
        timeout: Duration | None = None,
        memory_mb: int | None = None,
        batch_size: int | None = None,
        description: str | None = None,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            handler=handler,
            environment={
                "RELAY_QUEUE_URL": queue.queue.queue_url,
                "RELAY_DLQ_URL": queue.dlq.queue_url,
                **(environment or {}),
            },
            timeout=timeout,
            memory_mb=memory_mb,
            description=description,
        )
        stack = RelayStack.of(self)
        defaults = stack.config.consumers
        self.queue = queue
        timeout_seconds = int((timeout or Duration.seconds(defaults.timeout_seconds)).to_seconds())
        visibility = queue.ensure_visibility_timeout_at_least(VISIBILITY_FACTOR * timeout_seconds)
        # The kernel's heartbeat extends a long-running message by this much each time.
        self.function.add_environment("RELAY_VISIBILITY_TIMEOUT_SECONDS", str(visibility))

        window = defaults.batching_window_seconds
        self.event_source = sources.SqsEventSource(
            queue.queue,
            batch_size=batch_size or (min(defaults.batch_size, 10) if queue.fifo else defaults.batch_size),
            # FIFO queues do not accept a batching window.
            max_batching_window=None if queue.fifo or window == 0 else Duration.seconds(window),
            max_concurrency=defaults.max_concurrency,
            report_batch_item_failures=True,
        )
        self.function.add_event_source(self.event_source)
        # Parking: a permanent failure is sent to the DLQ at once with its reason.
        queue.dlq.grant_send_messages(self.function)
        stack.alarms.watch_consumer(self.function, label=construct_id)
