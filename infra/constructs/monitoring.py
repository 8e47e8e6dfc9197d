"""Service monitoring: the alarms and the dashboard of one service stack, all alarms to the alarm topic.

The stack builds its resources, then hands them here; no resource construct knows about alarms. What is
watched, and why:
- every DLQ: `ApproximateNumberOfMessagesVisible > 0` — a parked message is a decision someone must make;
- every reliable queue: `ApproximateAgeOfOldestMessage` over the stage's threshold — a stuck consumer;
- every consumer (and outbox publisher): Lambda `Errors` — a crashing handler makes SQS (or the stream)
  redeliver the whole batch;
- every API-destination rule and bus rule: `FailedInvocations` and `InvocationsSentToDlq`;
- the kernel metrics the stack names, e.g. `PayloadConflict`: the same eventId arrived with a different
  payload.
Forgetting is caught at synth: every SQS queue, consumer and scheduled call of the stack must have been
handed over, or synth fails naming what is unwatched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import jsii
from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct, IValidation

from infra.constructs import defaults
from infra.constructs.bus_rule import BusRule
from infra.constructs.fanout_topic import FanoutTopic
from infra.constructs.function import RelayFunction
from infra.constructs.outbox_publisher import OutboxPublisher
from infra.constructs.queue_consumer import QueueConsumer
from infra.constructs.reliable_queue import ReliableQueue
from infra.constructs.scheduled_api_call import ScheduledApiCall

PERIOD = Duration.seconds(defaults.ALARMS.period_seconds)


@dataclass(frozen=True)
class MonitoringSettings:
    """What one stack's monitoring needs besides the resources it watches."""

    alarm_topic: sns.ITopic  # from `core`
    dashboard_name: str
    service: str  # the `service` dimension of the kernel's EMF metrics
    metrics_namespace: str
    oldest_message_alarm_seconds: int


@dataclass(frozen=True)
class KernelMetric:
    """An alarm on a Relay kernel EMF metric: any datapoint above 0 in a period."""

    metric_name: str
    label: str
    description: str


class ServiceMonitoring(Construct):
    """`ServiceMonitoring(self, "Alarms", settings=..., queues=[...], consumers=[...], ...)`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: MonitoringSettings,
        queues: Sequence[ReliableQueue] = (),
        topics: Sequence[FanoutTopic] = (),
        outbox_publishers: Sequence[OutboxPublisher] = (),
        consumers: Sequence[RelayFunction] = (),
        scheduled_calls: Sequence[ScheduledApiCall] = (),
        bus_rules: Sequence[BusRule] = (),
        dead_letter_queues: Mapping[str, sqs.IQueue] | None = None,
        kernel_metrics: Sequence[KernelMetric] = (),
    ) -> None:
        """Each resource is watched for what it is: a reliable queue (its DLQ and its oldest message), a
        topic (its subscription DLQ), an outbox publisher (its errors and its stream DLQ), a consumer (its
        errors), a scheduled call (its rule and both DLQs), a bus rule (the rule, its target DLQ);
        `dead_letter_queues` (name → queue) for any
        other DLQ."""
        super().__init__(scope, construct_id)
        self.settings = settings
        self._action = cw_actions.SnsAction(settings.alarm_topic)
        self.dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=settings.dashboard_name)
        self.alarms: list[cw.Alarm] = []
        self._watched_queues: set[str] = set()
        self._watched_functions: set[str] = set()
        self._watched_calls: set[str] = set()

        for rq in queues:
            self._watch_reliable_queue(rq)
        for topic in topics:
            self._watch_dead_letter_queues(topic.dead_letter_queues)
        for publisher in outbox_publishers:
            self._watch_function(publisher)
            self._watch_dead_letter_queues(publisher.dead_letter_queues)
        for consumer in consumers:
            self._watch_function(consumer)
        for call in scheduled_calls:
            self._watch_dead_letter_queues(call.dead_letter_queues)
            self._watch_rule(
                call.rule_name,
                call.event_bus,
                label=call.name,
                failed=f"{call.name}: the API destination call failed after all retries; the events are in "
                f"its DLQ: `python -m ops dlq sample {call.name}-target-dlq`.",
                to_dlq=f"{call.name}: events were sent to the rule's DLQ: `python -m ops dlq sample "
                f"{call.name}-target-dlq`; fix the endpoint or its key, then `python -m ops dlq redrive`.",
            )
            self._watched_calls.add(call.node.path)
        for bus_rule in bus_rules:
            self._watch_dead_letter_queues(bus_rule.dead_letter_queues)
            self._watch_rule(
                bus_rule.rule_name,
                bus_rule.event_bus,
                label=bus_rule.name,
                failed=f"{bus_rule.name}: EventBridge could not deliver events to the {bus_rule.queue.name} "
                f"queue after all retries (its queue policy, or the queue is gone); they are in `python -m "
                f"ops dlq sample {bus_rule.name}-target-dlq`.",
                to_dlq=f"{bus_rule.name}: events were sent to the rule's DLQ: `python -m ops dlq sample "
                f"{bus_rule.name}-target-dlq`; fix the queue or its policy, then `python -m ops dlq "
                "redrive`.",
            )
            self._watched_calls.add(bus_rule.node.path)
        self._watch_dead_letter_queues(dead_letter_queues or {})
        for kernel_metric in kernel_metrics:
            self._watch_kernel_metric(kernel_metric)
        self.node.add_validation(_EverythingWatched(self))

    def _alarm(
        self, construct_id: str, *, metric: cw.IMetric, threshold: float, description: str
    ) -> cw.Alarm:
        alarm = cw.Alarm(
            self,
            construct_id,
            metric=metric,
            threshold=threshold,
            evaluation_periods=defaults.ALARMS.evaluation_periods,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )
        alarm.add_alarm_action(self._action)
        alarm.add_ok_action(self._action)
        self.alarms.append(alarm)
        return alarm

    def _watch_dead_letter_queues(self, queues: Mapping[str, sqs.IQueue]) -> None:
        for label, queue in queues.items():
            self._watch_dead_letter_queue(queue, label=label)

    def _watch_dead_letter_queue(self, queue: sqs.IQueue, *, label: str) -> None:
        self._watched_queues.add(queue.node.path)
        visible = queue.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum")
        self._alarm(
            f"{label}DlqNotEmpty",
            metric=visible,
            threshold=0,
            description=(
                f"{label}: messages are parked in the DLQ. Without receiving: `python -m ops status`, "
                "`python -m ops operation <id>` (parked ledger); sample on purpose: `python -m ops dlq "
                f"sample {label}`; fix the cause, then `python -m ops dlq redrive {label} --reason '...' "
                "--dry-run`, then without --dry-run."
            ),
        )
        self.dashboard.add_widgets(cw.GraphWidget(title=f"{label} DLQ depth", left=[visible], width=8))

    def _watch_reliable_queue(self, rq: ReliableQueue) -> None:
        self._watch_dead_letter_queue(rq.dlq, label=rq.name)
        self._watched_queues.add(rq.queue.node.path)
        age = rq.queue.metric_approximate_age_of_oldest_message(period=PERIOD, statistic="Maximum")
        threshold = self.settings.oldest_message_alarm_seconds
        self._alarm(
            f"{rq.name}OldestMessage",
            metric=age,
            threshold=threshold,
            description=f"{rq.name}: the oldest message is older than {threshold}s; the consumer is stuck "
            "or too slow. `python -m ops status` (ages, mappings), `python -m ops doctor` (wiring).",
        )
        depth = rq.queue.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum")
        self.dashboard.add_widgets(
            cw.GraphWidget(title=f"{rq.name} depth / oldest age", left=[depth], right=[age], width=8)
        )

    def _watch_function(self, consumer: RelayFunction) -> None:
        label = consumer.node.id
        self._watched_functions.add(consumer.node.path)
        function: lambda_.IFunction = consumer.function
        errors = function.metric_errors(period=PERIOD, statistic="Sum")
        self._alarm(
            f"{label}Errors",
            metric=errors,
            threshold=0,
            description=f"{label}: the handler raised; the whole batch returns to the queue. Read the "
            "function's logs; `python -m ops status` shows the queues it left behind.",
        )
        duration = function.metric_duration(period=PERIOD, statistic="p99")
        self.dashboard.add_widgets(
            cw.GraphWidget(title=f"{label} errors / p99 duration", left=[errors], right=[duration], width=8)
        )

    def _watch_rule(
        self, rule_name: str, bus: events.IEventBus, *, label: str, failed: str, to_dlq: str
    ) -> None:
        # EventBridge reports a custom bus's rule under EventBusName + RuleName, the plain name. Not the
        # rule's Ref (CDK's ``rule.rule_name``): on a custom bus that is "bus|name", which no metric carries.
        dims = {"EventBusName": bus.event_bus_name, "RuleName": rule_name}
        failed_metric = cw.Metric(
            namespace="AWS/Events",
            metric_name="FailedInvocations",
            dimensions_map=dims,
            period=PERIOD,
            statistic="Sum",
        )
        to_dlq_metric = cw.Metric(
            namespace="AWS/Events",
            metric_name="InvocationsSentToDlq",
            dimensions_map=dims,
            period=PERIOD,
            statistic="Sum",
        )
        self._alarm(f"{label}FailedInvocations", metric=failed_metric, threshold=0, description=failed)
        self._alarm(f"{label}SentToDlq", metric=to_dlq_metric, threshold=0, description=to_dlq)
        self.dashboard.add_widgets(
            cw.GraphWidget(title=f"{label} failed / to DLQ", left=[failed_metric, to_dlq_metric], width=8)
        )

    def _watch_kernel_metric(self, kernel_metric: KernelMetric) -> None:
        """Alarm on a Relay kernel EMF metric (the stage's namespace, dimension `service`)."""
        label = kernel_metric.label
        metric = cw.Metric(
            namespace=self.settings.metrics_namespace,
            metric_name=kernel_metric.metric_name,
            dimensions_map={"service": self.settings.service},
            period=PERIOD,
            statistic="Sum",
        )
        self.dashboard.add_widgets(cw.GraphWidget(title=f"{label}", left=[metric], width=8))
        self._alarm(f"{label}Alarm", metric=metric, threshold=0, description=kernel_metric.description)

    def unwatched(self) -> list[str]:
        """Construct paths of the stack's queues, consumers and scheduled calls no alarm watches."""
        watched = {
            "queue": self._watched_queues,
            "function": self._watched_functions,
            "scheduled call": self._watched_calls,
        }
        return [
            f"{construct.node.path} ({kind})"
            for construct, kind in _watchable(Stack.of(self).node.find_all())
            if construct.node.path not in watched[kind]
        ]


def _watchable(constructs: Iterable[object]) -> list[tuple[Construct, str]]:
    found: list[tuple[Construct, str]] = []
    for construct in constructs:
        if isinstance(construct, sqs.Queue):
            found.append((construct, "queue"))
        elif isinstance(construct, QueueConsumer | OutboxPublisher):
            found.append((construct, "function"))
        elif isinstance(construct, ScheduledApiCall | BusRule):
            found.append((construct, "scheduled call"))
    return found


@jsii.implements(IValidation)
class _EverythingWatched:
    def __init__(self, monitoring: ServiceMonitoring) -> None:
        self.monitoring = monitoring

    def validate(self) -> list[str]:
        return [
            f"{path} is not watched: hand it to ServiceMonitoring ({self.monitoring.node.path}) so it is "
            "alarmed"
            for path in self.monitoring.unwatched()
        ]
