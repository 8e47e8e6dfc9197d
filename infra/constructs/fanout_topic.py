"""Fan-out topic: an SNS topic whose subscriptions can only be made the safe way.

Defaults it owns (each has one infra test named after it):
- server-side encryption (the AWS-managed `alias/aws/sns` key: SNS itself decrypts before delivering, so
  SQS subscribers need no key grants) and a topic policy that refuses publishing without TLS;
- `subscribe(queue, filter_policy=..., raw_delivery=...)` adds the SQS queue policy statement allowing
  `sns.amazonaws.com` to send only when `aws:SourceArn` is this topic, so no other topic can inject;
- a subscription DLQ per topic: messages SNS could not deliver (queue deleted, policy broken) are kept
  for 14 days and alarmed instead of being dropped after SNS's retries.
"""

from __future__ import annotations

from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.constructs.base import RelayStack
from infra.constructs.reliable_queue import ReliableQueue, dead_letter_queue


class FanoutTopic(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, name: str) -> None:
        super().__init__(scope, construct_id)
        stack = RelayStack.of(self)
        self.name = name
        self.topic = sns.Topic(
            self,
            "Topic",
            topic_name=stack.physical_name(name),
            master_key=kms.Alias.from_alias_name(self, "SnsKey", "alias/aws/sns"),
            enforce_ssl=True,
        )
        self._undeliverable: sqs.Queue | None = None

    @property
    def undeliverable(self) -> sqs.Queue:
        """Created with the first subscription: where SNS puts what it could not deliver."""
        if self._undeliverable is None:
            self._undeliverable = dead_letter_queue(self, "Undeliverable", name=f"{self.name}-undeliverable")
        return self._undeliverable

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
