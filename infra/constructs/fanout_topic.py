"""Fan-out topic: an SNS topic whose subscriptions can only be made the safe way.

Defaults it owns (each has one infra test named after it):
- server-side encryption (the AWS-managed `alias/aws/sns` key: SNS itself decrypts before delivering, so
  SQS subscribers need no key grants) and a topic policy that refuses publishing without TLS;
- `subscribe(queue, filter_policy=..., raw_delivery=...)` adds the SQS queue policy statement allowing
  `sns.amazonaws.com` to send only when `aws:SourceArn` is this topic, so no other topic can inject;
- `archive_to(stream)` subscribes an Amazon Data Firehose stream (no filter: every event),
  with a role of its own that only SNS may assume and that may only put records into that stream (and
  describe it);
- a subscription DLQ per topic: messages SNS could not deliver (queue deleted, policy broken) are kept
  for the stage's DLQ retention instead of being dropped after SNS's retries (`dead_letter_queues`, for
  `ServiceMonitoring` to alarm on).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesisfirehose as firehose
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import QueueSettings
from infra.constructs.naming import Naming
from infra.constructs.reliable_queue import ReliableQueue, dead_letter_queue


def allowlist_filter(spec: Mapping[str, Sequence[str]]) -> dict[str, sns.SubscriptionFilter]:
    """`{"eventType": ["OrderCreated", ...]}` (the plain form the handlers' contract modules use, e.g.
    `functions/orders/subscriptions.py`) → an SNS filter policy matching those message attribute values."""
    return {key: sns.SubscriptionFilter.string_filter(allowlist=list(values)) for key, values in spec.items()}


class FanoutTopic(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        naming: Naming,
        settings: QueueSettings,
        removal_policy: RemovalPolicy,
    ) -> None:
        """`settings` and `removal_policy` are those of the subscription DLQ."""
        super().__init__(scope, construct_id)
        self.name = name
        self._naming = naming
        self._settings = settings
        self._removal_policy = removal_policy
        self.topic = sns.Topic(
            self,
            "Topic",
            topic_name=naming(name),
            master_key=kms.Alias.from_alias_name(self, "SnsKey", "alias/aws/sns"),
            enforce_ssl=True,
        )
        self._undeliverable: sqs.Queue | None = None

    @property
    def undeliverable(self) -> sqs.Queue:
        """Created with the first subscription: where SNS puts what it could not deliver."""
        if self._undeliverable is None:
            self._undeliverable = dead_letter_queue(
                self,
                "Undeliverable",
                name=f"{self.name}-undeliverable",
                naming=self._naming,
                settings=self._settings,
                removal_policy=self._removal_policy,
            )
        return self._undeliverable

    @property
    def dead_letter_queues(self) -> dict[str, sqs.IQueue]:
        """The DLQs this topic made, by name (none before the first subscription)."""
        if self._undeliverable is None:
            return {}
        return {f"{self.name}-undeliverable": self._undeliverable}

    def subscribe(
        self,
        queue: ReliableQueue,
        *,
        filter_policy: dict[str, sns.SubscriptionFilter] | None = None,
        raw_delivery: bool = False,
    ) -> None:
        if queue.fifo:
            raise ValueError(f"{self.node.path}: a standard topic cannot deliver to FIFO queue {queue.name}")
        self.topic.add_subscription(
            subs.SqsSubscription(
                queue.queue,
                raw_message_delivery=raw_delivery,
                filter_policy=filter_policy,
                dead_letter_queue=self.undeliverable,
            )
        )

    def archive_to(self, stream: firehose.IDeliveryStream, *, raw_delivery: bool = True) -> None:
        """Every event into ``stream`` (raw delivery: the message body alone, one record each); what SNS
        could not deliver after its retries goes to the topic's subscription DLQ, as for the queues."""
        role = iam.Role(
            self,
            "ArchiveRole",
            assumed_by=iam.ServicePrincipal(
                "sns.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": Stack.of(self).account}},
            ),
            description=f"SNS {self.name}: puts each message into its archive stream, nothing else",
        )
        # FirehoseSubscription grants the role the subscription role's documented actions on this
        # stream alone (https://docs.aws.amazon.com/sns/latest/dg/prereqs-kinesis-data-firehose.html).
        subscription = self.topic.add_subscription(
            subs.FirehoseSubscription(
                stream, raw_message_delivery=raw_delivery, dead_letter_queue=self.undeliverable, role=role
            )
        )
        subscription.node.add_dependency(role)  # its policy first: SNS puts as the role from the start
