"""Alarms and one dashboard per service stack, all alarms to the app's alarm topic.

What is watched, and why:
- every DLQ: `ApproximateNumberOfMessagesVisible > 0` — a parked message is a decision someone must make;
- every reliable queue: `ApproximateAgeOfOldestMessage` over the configured threshold — a stuck consumer;
- every consumer: Lambda `Errors` — a crashing handler makes SQS redeliver the whole batch;
- every API-destination rule: `FailedInvocations` and `InvocationsSentToDlq`;
- the kernel's `PayloadConflict` metric: the same eventId arrived with a different payload.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

if TYPE_CHECKING:
    from infra.constructs.reliable_queue import ReliableQueue

PERIOD = Duration.minutes(1)


class ServiceAlarms(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, topic: sns.ITopic) -> None:
        super().__init__(scope, construct_id)
        from infra.constructs.base import RelayStack

        self._stack = RelayStack.of(self)
        self.topic = topic
        self._action = cw_actions.SnsAction(topic)
        self.dashboard = cw.Dashboard(
            self, "Dashboard", dashboard_name=self._stack.physical_name("dashboard")
        )
        self.alarms: list[cw.Alarm] = []

    def _alarm(
        self, construct_id: str, *, metric: cw.IMetric, threshold: float, description: str
    ) -> cw.Alarm:
        alarm = cw.Alarm(
            self,
            construct_id,
            metric=metric,
            threshold=threshold,
            evaluation_periods=1,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )
        alarm.add_alarm_action(self._action)
        alarm.add_ok_action(self._action)
        self.alarms.append(alarm)
        return alarm

    def watch_dead_letter_queue(self, queue: sqs.IQueue, *, label: str) -> cw.Alarm:
        visible = queue.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum")
        alarm = self._alarm(
            f"{label}DlqNotEmpty",
            metric=visible,
            threshold=0,
            description=f"{label}: messages are parked in the DLQ. Inspect with `python -m ops dlq`, fix the "
            "cause, then redrive.",
        )
        self.dashboard.add_widgets(cw.GraphWidget(title=f"{label} DLQ depth", left=[visible], width=8))
        return alarm

    def watch_reliable_queue(self, rq: ReliableQueue) -> None:
        self.watch_dead_letter_queue(rq.dlq, label=rq.name)
        age = rq.queue.metric_approximate_age_of_oldest_message(period=PERIOD, statistic="Maximum")
        threshold = self._stack.config.queues.oldest_message_alarm_seconds
        self._alarm(
            f"{rq.name}OldestMessage",
            metric=age,
            threshold=threshold,
            description=f"{rq.name}: the oldest message is older than {threshold}s; the consumer is stuck "
            "or too slow.",
        )
        depth = rq.queue.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum")
        self.dashboard.add_widgets(
            cw.GraphWidget(title=f"{rq.name} depth / oldest age", left=[depth], right=[age], width=8)
        )

    def watch_consumer(self, function: lambda_.IFunction, *, label: str) -> None:
        errors = function.metric_errors(period=PERIOD, statistic="Sum")
        self._alarm(
            f"{label}Errors",
            metric=errors,
            threshold=0,
            description=f"{label}: the handler raised; the whole batch returns to the queue.",
        )
        duration = function.metric_duration(period=PERIOD, statistic="p99")
        self.dashboard.add_widgets(
            cw.GraphWidget(title=f"{label} errors / p99 duration", left=[errors], right=[duration], width=8)
        )

    def watch_api_destination_rule(self, rule: events.IRule, *, label: str) -> None:
        dims = {"RuleName": rule.rule_name}
        failed = cw.Metric(
            namespace="AWS/Events",
            metric_name="FailedInvocations",
            dimensions_map=dims,
            period=PERIOD,
            statistic="Sum",
        )
        to_dlq = cw.Metric(
            namespace="AWS/Events",
            metric_name="InvocationsSentToDlq",
            dimensions_map=dims,
            period=PERIOD,
            statistic="Sum",
        )
        self._alarm(
            f"{label}FailedInvocations",
            metric=failed,
            threshold=0,
            description=f"{label}: the API destination call failed after all retries.",
        )
        self._alarm(
            f"{label}SentToDlq",
            metric=to_dlq,
            threshold=0,
            description=f"{label}: events were sent to the rule's DLQ.",
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(title=f"{label} failed / to DLQ", left=[failed, to_dlq], width=8)
        )

    def watch_kernel_metric(self, metric_name: str, *, label: str, description: str) -> cw.Alarm:
        """Alarm on a Relay kernel EMF metric (namespace from config, dimension `service`)."""
        metric = cw.Metric(
            namespace=self._stack.config.metrics_namespace,
            metric_name=metric_name,
            dimensions_map={"service": self._stack.service},
            period=PERIOD,
            statistic="Sum",
        )
        self.dashboard.add_widgets(cw.GraphWidget(title=f"{label}", left=[metric], width=8))
        return self._alarm(f"{label}Alarm", metric=metric, threshold=0, description=description)
