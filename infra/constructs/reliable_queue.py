"""Reliable queue: a work queue that cannot be built without a dead-letter queue and the safe defaults.

Defaults it owns (each has one infra test named after it; the values are in `defaults.QUEUES`):
- a DLQ keeping messages for the stage's `dlq_retention_days` (14 by default, the SQS maximum: the
  longest window to notice and redrive), and a redrive allow policy on the DLQ naming its source only;
- redrive `maxReceiveCount` 5 by default and never below 5 — lower values park healthy messages during a
  short dependency outage or a Lambda scale-up burst;
- SSE-SQS (SQS-owned keys): unlike the AWS-managed `aws/sqs` KMS key, SNS and EventBridge can deliver to it;
- a queue policy denying any request without TLS;
- the DLQ follows the stage's removal policy (retained in prod: parked messages are decisions someone
  still has to make); the work queue itself is always deleted with its stack.
Its alarms (DLQ not empty, oldest message age) are `ServiceMonitoring`'s, given this queue by the stack.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Stack, Validations
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import QueueSettings
from infra.constructs import defaults
from infra.constructs.defaults import MIN_MAX_RECEIVE_COUNT, SQS_MAX_VISIBILITY_SECONDS
from infra.constructs.naming import Naming


def dead_letter_queue(
    scope: Construct,
    construct_id: str,
    *,
    name: str,
    naming: Naming,
    settings: QueueSettings,
    removal_policy: RemovalPolicy,
    fifo: bool = False,
) -> sqs.Queue:
    """A queue that only ever receives what others give up on: encrypted, TLS-only, kept
    `settings.dlq_retention_days`. The caller hands it to `ServiceMonitoring` to be alarmed."""
    queue = sqs.Queue(
        scope,
        construct_id,
        queue_name=naming(name) + (".fifo" if fifo else ""),
        fifo=fifo or None,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=Duration.days(settings.dlq_retention_days),
        removal_policy=removal_policy,
    )
    # AwsSolutions-SQS3 recognizes only queue→queue redrive; this queue is the DLQ of an SNS subscription,
    # a Scheduler schedule or an EventBridge target, and the Relay guard RELAY-DLQ checks that it is
    # referenced as one in the template.
    Validations.of(queue).acknowledge(
        Acknowledgment(
            id="AwsSolutions::AwsSolutions-SQS3",
            reason="This queue is itself a dead-letter queue (of an SNS subscription, Scheduler schedule or "
            "EventBridge target); a DLQ of a DLQ would only move the problem. Its depth is alarmed.",
        )
    )
    return queue


class ReliableQueue(Construct):
    """A work queue and its DLQ. Use `.queue` to send/subscribe and `.dlq` to park.

    `ReliableQueue(self, "Work", name="work", naming=naming, settings=config.queues,
    removal_policy=removal_policy)`: `naming` makes the physical names (`<prefix>-<service>-work` and
    `…-work-dlq`), `settings` the stage's queue settings, `removal_policy` the DLQ's on stack deletion.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        naming: Naming,
        settings: QueueSettings,
        removal_policy: RemovalPolicy,
        fifo: bool = False,
        content_based_deduplication: bool = False,
        max_receive_count: int | None = None,
        visibility_timeout: Duration | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        receive_count = settings.max_receive_count if max_receive_count is None else max_receive_count
        if receive_count < MIN_MAX_RECEIVE_COUNT:
            raise ValueError(
                f"{self.node.path}: max_receive_count={receive_count} is below {MIN_MAX_RECEIVE_COUNT}; "
                "a lower value parks healthy messages during short outages and Lambda scale-up"
            )
        if content_based_deduplication and not fifo:
            raise ValueError(f"{self.node.path}: content_based_deduplication needs fifo=True")

        suffix = ".fifo" if fifo else ""
        self.name = name
        self.fifo = fifo
        self.max_receive_count = receive_count
        queue_name = naming(name) + suffix
        # The DLQ's redrive allow policy must name the source queue, and the source's redrive policy names
        # the DLQ: with generated names that is a CloudFormation cycle, so the source ARN is built from
        # its (deterministic) physical name.
        source_arn = Stack.of(self).format_arn(service="sqs", resource=queue_name)

        self.dlq = sqs.Queue(
            self,
            "Dlq",
            queue_name=naming(name + "-dlq") + suffix,
            fifo=fifo or None,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(settings.dlq_retention_days),
            removal_policy=removal_policy,
        )
        cfn_dlq = self.dlq.node.default_child
        assert isinstance(cfn_dlq, sqs.CfnQueue)
        cfn_dlq.redrive_allow_policy = {"redrivePermission": "byQueue", "sourceQueueArns": [source_arn]}

        self.queue = sqs.Queue(
            self,
            "Queue",
            queue_name=queue_name,
            fifo=fifo or None,
            content_based_deduplication=content_based_deduplication or None,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(settings.retention_days),
            visibility_timeout=visibility_timeout
            or Duration.seconds(defaults.QUEUES.visibility_timeout_seconds),
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dlq, max_receive_count=receive_count),
            # Work in flight is not kept when its stack (and with it every consumer) is deleted; what
            # consumers gave up on is, in the DLQ.
            removal_policy=RemovalPolicy.DESTROY,
        )

    @property
    def cfn_queue(self) -> sqs.CfnQueue:
        cfn = self.queue.node.default_child
        assert isinstance(cfn, sqs.CfnQueue)
        return cfn

    def ensure_visibility_timeout_at_least(self, seconds: int) -> int:
        """Raise (never lower) the visibility timeout; SQS caps it at 12 hours. Returns the new value."""
        current = self.cfn_queue.visibility_timeout
        current_seconds = (
            current if isinstance(current, int | float) else defaults.QUEUES.visibility_timeout_seconds
        )
        visibility = min(max(int(current_seconds), seconds), SQS_MAX_VISIBILITY_SECONDS)
        self.cfn_queue.visibility_timeout = visibility
        return visibility
