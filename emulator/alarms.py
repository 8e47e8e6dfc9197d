"""CloudWatch alarms that fire in the emulator: metrics from EMF log lines and queue depths, alarms
evaluated on the caller's clock, state changes published to the alarm actions as CloudWatch does.

Moto stores alarms (PutMetricAlarm, DescribeAlarms, SetAlarmState) but never evaluates them, and nothing
in the emulator emits the metrics they watch. ``AlarmEvaluator`` closes both gaps:

- metrics: ``MetricStore.ingest_emf(line)`` turns one CloudWatch Embedded Metric Format line (what
  Powertools Metrics prints) into datapoints, as CloudWatch Logs does on AWS; ``sample_queues(now)`` records
  ``AWS/SQS`` ``ApproximateNumberOfMessagesVisible`` / ``ApproximateAgeOfOldestMessage`` of every queue an
  alarm watches, as SQS reports them to CloudWatch every minute (the age only through a ``sampler``,
  as the sandbox's ``emulator.alarm_service`` gives it). Functions never call PutMetricData.
- evaluation: ``evaluate(now)`` reads every alarm from moto (DescribeAlarms), takes the last
  ``EvaluationPeriods`` periods ending at ``now``, applies the statistic, the comparison,
  ``DatapointsToAlarm``
  (M out of N) and ``TreatMissingData`` (missing, notBreaching, breaching, ignore), and on a state change
  calls SetAlarmState and publishes CloudWatch's alarm notification (Subject ``ALARM: "name" in <region>``,
  Message the JSON with AlarmName, NewStateValue, OldStateValue, NewStateReason, Trigger, ...) to the
  actions of the new state. Time is the caller's: a test calls ``evaluate(now)`` with its own clock.
- what it cannot evaluate (metric math, anomaly detection, percentiles, composite alarms) is listed in
  ``not_understood`` with the reason, and never silently treated as OK.
"""

from __future__ import annotations

import json
import math
import operator
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

SQS_NAMESPACE = "AWS/SQS"
SQS_METRICS = ("ApproximateNumberOfMessagesVisible", "ApproximateAgeOfOldestMessage")
STATISTICS = ("Sum", "Average", "Maximum", "Minimum", "SampleCount")
COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    "GreaterThanThreshold": operator.gt,
    "GreaterThanOrEqualToThreshold": operator.ge,
    "LessThanThreshold": operator.lt,
    "LessThanOrEqualToThreshold": operator.le,
}
COMPARISON_WORDS = {
    "GreaterThanThreshold": "greater than",
    "GreaterThanOrEqualToThreshold": "greater than or equal to",
    "LessThanThreshold": "less than",
    "LessThanOrEqualToThreshold": "less than or equal to",
}
REGION_NAMES = {"us-east-1": "US East (N. Virginia)", "eu-west-1": "EU (Ireland)"}

Dimensions = tuple[tuple[str, str], ...]


def _dims(pairs: Mapping[str, str]) -> Dimensions:
    return tuple(sorted(pairs.items()))


@dataclass
class MetricStore:
    """Datapoints by (namespace, metric name, dimensions): what CloudWatch would hold."""

    points: dict[tuple[str, str, Dimensions], list[tuple[datetime, float]]] = field(
        default_factory=lambda: defaultdict(list)
    )

    def put(
        self, namespace: str, name: str, dimensions: Mapping[str, str], value: float, at: datetime
    ) -> None:
        self.points[(namespace, name, _dims(dimensions))].append((at, value))

    def values(
        self, namespace: str, name: str, dimensions: Mapping[str, str], start: datetime, end: datetime
    ) -> list[float]:
        return [v for t, v in self.points.get((namespace, name, _dims(dimensions)), []) if start < t <= end]

    def ingest_emf(self, line: str, *, at: datetime | None = None, shift: timedelta = timedelta(0)) -> int:
        """One log line; the datapoints it held (0 for a line that is not EMF). As CloudWatch Logs does,
        each DimensionSet of each directive publishes each metric; the timestamp is ``_aws.Timestamp``
        (ms), or ``at``, plus ``shift`` (a sandbox clock that runs ahead of the wall clock)."""
        try:
            doc = json.loads(line)
        except ValueError:
            return 0
        if not isinstance(doc, dict) or not isinstance(doc.get("_aws"), dict):
            return 0
        meta = doc["_aws"]
        stamp = (at or datetime.fromtimestamp(float(meta.get("Timestamp", 0)) / 1000, UTC)) + shift
        count = 0
        for directive in meta.get("CloudWatchMetrics", []):
            namespace = directive.get("Namespace", "aws-embedded-metrics")
            for dimension_set in directive.get("Dimensions", [[]]):
                dims = {d: str(doc[d]) for d in dimension_set if d in doc}
                for metric in directive.get("Metrics", []):
                    raw = doc.get(metric.get("Name"))
                    for value in raw if isinstance(raw, list) else [raw]:
                        if isinstance(value, int | float):
                            self.put(namespace, metric["Name"], dims, float(value), stamp)
                            count += 1
        return count


@dataclass(frozen=True)
class Alarm:
    """A single-metric alarm as DescribeAlarms returns it, with the fields evaluation needs."""

    name: str
    arn: str
    description: str
    namespace: str
    metric_name: str
    dimensions: dict[str, str]
    period: int
    statistic: str
    threshold: float
    comparison: str
    evaluation_periods: int
    datapoints_to_alarm: int
    treat_missing_data: str
    actions: dict[str, list[str]]
    state: str
    raw: dict[str, Any]

    @classmethod
    def parse(cls, d: Mapping[str, Any]) -> Alarm | str:
        """The alarm, or why the evaluator cannot evaluate it."""
        if d.get("Metrics"):
            return "metric math / multiple metrics are not evaluated"
        if d.get("ExtendedStatistic"):
            return f"extended statistic {d['ExtendedStatistic']} (percentiles) is not evaluated"
        if d.get("ThresholdMetricId") or d["ComparisonOperator"] not in COMPARISONS:
            return f"comparison {d['ComparisonOperator']} (anomaly detection) is not evaluated"
        if d.get("Statistic") not in STATISTICS:
            return f"statistic {d.get('Statistic')} is not evaluated"
        evaluation_periods = int(d["EvaluationPeriods"])
        return cls(
            name=d["AlarmName"],
            arn=d.get("AlarmArn", ""),
            description=d.get("AlarmDescription", ""),
            namespace=d["Namespace"],
            metric_name=d["MetricName"],
            dimensions={x["Name"]: x["Value"] for x in d.get("Dimensions", [])},
            period=int(d["Period"]),
            statistic=d["Statistic"],
            threshold=float(d["Threshold"]),
            comparison=d["ComparisonOperator"],
            evaluation_periods=evaluation_periods,
            datapoints_to_alarm=int(d.get("DatapointsToAlarm") or evaluation_periods),
            treat_missing_data=d.get("TreatMissingData") or "missing",
            actions={
                "ALARM": list(d.get("AlarmActions", [])),
                "OK": list(d.get("OKActions", [])),
                "INSUFFICIENT_DATA": list(d.get("InsufficientDataActions", [])),
            },
            state=d.get("StateValue", "INSUFFICIENT_DATA"),
            raw=dict(d),
        )


def statistic(name: str, values: Sequence[float]) -> float:
    if name == "Sum":
        return math.fsum(values)
    if name == "Average":
        return math.fsum(values) / len(values)
    if name == "Maximum":
        return max(values)
    if name == "Minimum":
        return min(values)
    return float(len(values))


@dataclass(frozen=True)
class Transition:
    alarm: str
    old: str
    new: str
    reason: str
    notified: tuple[str, ...]


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}+0000"


@dataclass
class AlarmEvaluator:
    """``AlarmEvaluator(cloudwatch, sns, sqs)`` (boto3 clients on the emulator); ``evaluate(now)``."""

    cloudwatch: Any
    sns: Any
    sqs: Any = None
    region: str = "us-east-1"
    account: str = "123456789012"
    store: MetricStore = field(default_factory=MetricStore)
    not_understood: dict[str, str] = field(default_factory=dict)
    # Queue name -> (ApproximateNumberOfMessagesVisible, ApproximateAgeOfOldestMessage) for every queue, in
    # one read; without it, GetQueueAttributes per watched queue (and no age).
    sampler: Callable[[], Mapping[str, tuple[float, float]]] | None = None
    # May CloudWatch, for the alarm (its ARN), publish to the topic? The topic's policy decides on AWS;
    # without it, every publish is allowed. A refused action is recorded in ``failed_actions``.
    authorize: Callable[[str, str], bool] | None = None
    failed_actions: list[str] = field(default_factory=list)

    def alarms(self) -> list[Alarm]:
        found: list[Alarm] = []
        for page in self.cloudwatch.get_paginator("describe_alarms").paginate(AlarmTypes=["MetricAlarm"]):
            for d in page["MetricAlarms"]:
                parsed = Alarm.parse(d)
                if isinstance(parsed, str):
                    self.not_understood[d["AlarmName"]] = parsed
                else:
                    found.append(parsed)
        for page in self.cloudwatch.get_paginator("describe_alarms").paginate(AlarmTypes=["CompositeAlarm"]):
            for d in page.get("CompositeAlarms", []):
                self.not_understood[d["AlarmName"]] = "composite alarms are not evaluated"
        return found

    def sample_queues(self, now: datetime, alarms: Sequence[Alarm]) -> None:
        """SQS's one-minute report to CloudWatch, for each queue an alarm watches."""
        names = {a.dimensions.get("QueueName") for a in alarms if a.namespace == SQS_NAMESPACE}
        if self.sampler is not None:
            sampled = self.sampler()
            for name in sorted(n for n in names if n and n in sampled):
                visible, age = sampled[name]
                self.store.put(SQS_NAMESPACE, SQS_METRICS[0], {"QueueName": name}, visible, now)
                self.store.put(SQS_NAMESPACE, SQS_METRICS[1], {"QueueName": name}, age, now)
            return
        if self.sqs is None:
            return
        for name in sorted(n for n in names if n):
            try:
                url = self.sqs.get_queue_url(QueueName=name)["QueueUrl"]
                attrs = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
            except Exception as error:  # a missing queue reports no data, as on AWS
                self.not_understood.setdefault(f"queue {name}", f"cannot be sampled: {error}")
                continue
            dims = {"QueueName": name}
            self.store.put(
                SQS_NAMESPACE, SQS_METRICS[0], dims, float(attrs["ApproximateNumberOfMessages"]), now
            )
            # ApproximateAgeOfOldestMessage is not sampled yet: its alarms see missing data.

    def evaluate(self, now: datetime) -> list[Transition]:
        """Sample, evaluate every alarm at ``now``, apply and publish the state changes."""
        alarms = self.alarms()
        self.sample_queues(now, alarms)
        changes = []
        for alarm in alarms:
            new, reason = self._state(alarm, now)
            if new is None or new == alarm.state:
                continue
            self.cloudwatch.set_alarm_state(AlarmName=alarm.name, StateValue=new, StateReason=reason)
            notified = tuple(self._notify(alarm, new, reason, now))
            changes.append(Transition(alarm.name, alarm.state, new, reason, notified))
        return changes

    def _state(self, alarm: Alarm, now: datetime) -> tuple[str | None, str]:
        periods = []
        end = now
        for _ in range(alarm.evaluation_periods):
            start = end - timedelta(seconds=alarm.period)
            values = self.store.values(alarm.namespace, alarm.metric_name, alarm.dimensions, start, end)
            periods.append((start, statistic(alarm.statistic, values) if values else None))
            end = start
        present = [(t, v) for t, v in periods if v is not None]
        compare = COMPARISONS[alarm.comparison]
        breaching = sum(1 for _, v in present if compare(v, alarm.threshold))
        missing = len(periods) - len(present)
        treat = alarm.treat_missing_data
        if treat == "breaching":
            breaching += missing
        if not present and treat in ("missing", "ignore"):
            if treat == "ignore":
                return None, ""
            return "INSUFFICIENT_DATA", "Insufficient Data: no datapoints were received for the periods."
        shown = ", ".join(f"{v} ({t.strftime('%d/%m/%y %H:%M:%S')})" for t, v in present)
        words = COMPARISON_WORDS[alarm.comparison]
        if breaching >= alarm.datapoints_to_alarm:
            return "ALARM", (
                f"Threshold Crossed: {breaching} out of the last {len(periods)} datapoints [{shown}] "
                f"was {words} the threshold ({alarm.threshold}) (minimum {alarm.datapoints_to_alarm} "
                "datapoint for OK -> ALARM transition)."
            )
        return "OK", (
            f"Threshold Crossed: no datapoints were {words} the threshold ({alarm.threshold}) among the "
            f"last {len(periods)} periods [{shown}] (treat missing data: {treat})."
        )

    def _notify(self, alarm: Alarm, new: str, reason: str, now: datetime) -> list[str]:
        if not alarm.raw.get("ActionsEnabled", True):
            return []
        region = REGION_NAMES.get(self.region, self.region)
        configured = alarm.raw.get("AlarmConfigurationUpdatedTimestamp")
        message = {
            "AlarmName": alarm.name,
            "AlarmDescription": alarm.description or None,
            "AWSAccountId": self.account,
            "AlarmConfigurationUpdatedTimestamp": _stamp(configured)
            if isinstance(configured, datetime)
            else None,
            "NewStateValue": new,
            "NewStateReason": reason,
            "StateChangeTime": _stamp(now),
            "Region": region,
            "AlarmArn": alarm.arn,
            "OldStateValue": alarm.state,
            "OKActions": alarm.actions["OK"],
            "AlarmActions": alarm.actions["ALARM"],
            "InsufficientDataActions": alarm.actions["INSUFFICIENT_DATA"],
            "Trigger": {
                "MetricName": alarm.metric_name,
                "Namespace": alarm.namespace,
                "StatisticType": "Statistic",
                "Statistic": alarm.statistic.upper(),
                "Unit": alarm.raw.get("Unit"),
                "Dimensions": [{"value": v, "name": k} for k, v in alarm.dimensions.items()],
                "Period": alarm.period,
                "EvaluationPeriods": alarm.evaluation_periods,
                "DatapointsToAlarm": alarm.datapoints_to_alarm,
                "ComparisonOperator": alarm.comparison,
                "Threshold": alarm.threshold,
                "TreatMissingData": alarm.treat_missing_data,
                "EvaluateLowSampleCountPercentile": "",
            },
        }
        sent = []
        for arn in alarm.actions[new]:
            if arn.startswith("arn:aws:sns:"):
                if self.authorize is not None and not self.authorize(alarm.arn, arn):
                    # CloudWatch records "Failed to execute action" in the alarm's history; nothing is sent.
                    self.failed_actions.append(f"{alarm.name} {new}: not allowed to publish to {arn}")
                    continue
                self.sns.publish(
                    TopicArn=arn,
                    Subject=f'{new}: "{alarm.name}" in {region}'[:100],
                    Message=json.dumps(message),
                )
                sent.append(arn)
            else:
                self.not_understood.setdefault(f"{alarm.name} action {arn}", "only SNS actions are emulated")
        return sent
