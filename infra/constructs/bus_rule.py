"""Bus rule: an EventBridge rule on the app's event bus whose target is a reliable queue.

EventBridge routes by content: the publisher puts its event on the bus once, and every rule whose
pattern matches hands it to its target. Every hop owns its failure handling, so nothing is silently lost:
- the target is a `ReliableQueue` (DLQ, redrive, SSE-SQS, TLS-only), consumed through the kernel;
- the target has a retry policy (attempts, maximum event age) and a DLQ of its own for the events
  EventBridge could not deliver to the queue (a changed queue policy, a deleted queue); its policy, like
  the queue's, admits `events.amazonaws.com` from this rule only (`aws:SourceArn`, added by CDK);
- the pattern is given in EventBridge's JSON syntax, as the service's contract module writes it (the
  same dict its tests match events against); it is set on the rule as is, so `$or` and every content
  filter are available.
`ServiceMonitoring(bus_rules=[...])` alarms on the rule's failed invocations and DLQ deliveries and on
the target DLQ's depth.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import QueueSettings
from infra.constructs import defaults
from infra.constructs.naming import Naming
from infra.constructs.reliable_queue import ReliableQueue, dead_letter_queue


class BusRule(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        naming: Naming,
        event_bus: events.IEventBus,
        pattern: Mapping[str, Any],
        queue: ReliableQueue,
        queues: QueueSettings,
        removal_policy: RemovalPolicy,
        retry_attempts: int = defaults.BUS_RULES.retry_attempts,
        max_event_age: Duration | None = None,
        description: str | None = None,
    ) -> None:
        """`event_bus` is the app's bus (from `core`); `queues` and `removal_policy` are the target DLQ's."""
        super().__init__(scope, construct_id)
        if "source" not in pattern:
            # A rule without a source matches every publisher's events that happen to fit the rest.
            raise ValueError(f"{self.node.path}: the event pattern must name its source")
        if queue.fifo:
            raise ValueError(
                f"{self.node.path}: rule {name} targets FIFO queue {queue.name}; use a standard one"
            )
        self.name = name
        self.queue = queue
        self.pattern = dict(pattern)
        self.target_dlq: sqs.Queue = dead_letter_queue(
            self,
            "TargetDlq",
            name=f"{name}-target-dlq",
            naming=naming,
            settings=queues,
            removal_policy=removal_policy,
        )
        self.event_bus = event_bus
        self.rule_name = naming(name)
        self.rule = events.Rule(
            self,
            "Rule",
            rule_name=self.rule_name,
            event_bus=event_bus,
            description=description,
            # Replaced below by the pattern as given; CDK needs one to synthesize the rule.
            event_pattern=events.EventPattern(source=list(pattern["source"])),
            targets=[
                targets.SqsQueue(
                    queue.queue,
                    dead_letter_queue=self.target_dlq,
                    retry_attempts=retry_attempts,
                    max_event_age=max_event_age or Duration.seconds(defaults.BUS_RULES.max_event_age_seconds),
                )
            ],
        )
        cfn = self.rule.node.default_child
        assert isinstance(cfn, events.CfnRule)
        cfn.add_property_override("EventPattern", self.pattern)

    @property
    def dead_letter_queues(self) -> dict[str, sqs.IQueue]:
        return {f"{self.name}-target-dlq": self.target_dlq}
