"""CloudWatch alarms start in INSUFFICIENT_DATA and PutMetricAlarm refuses what CloudWatch refuses (patch 16).

moto's behaviour: ``CloudWatchBackend.put_metric_alarm`` (moto/cloudwatch/models.py) builds a new
``Alarm`` whose ``state_value`` is ``OK`` (with the reason "Unchecked: Initial alarm creation"), and a
second PutMetricAlarm of the same name replaces the alarm with a new one, back to ``OK``. It accepts any
Period, a DatapointsToAlarm above EvaluationPeriods, an evaluation range of weeks, any
ComparisonOperator and TreatMissingData, and both or neither of Statistic and ExtendedStatistic.

AWS's behaviour: a new alarm is ``INSUFFICIENT_DATA`` until its first evaluation, so its first
transition (to OK or ALARM) runs that state's actions; updating an existing alarm "completely
overwrites the previous configuration" but leaves its state unchanged
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutMetricAlarm.html). The same page
gives the rules CloudWatch enforces, answered here with its errors: Period 10, 20, 30 or a multiple of
60 (``ValidationError: Period must be 10, 30 or a multiple of 60``, as CloudWatch words it); Period x
EvaluationPeriods at most one day for periods under an hour, seven days otherwise; DatapointsToAlarm
at most EvaluationPeriods (``ValidationError: DatapointsToAlarm must be less than or equal to
EvaluationPeriods``); exactly one of Statistic and ExtendedStatistic for a single-metric alarm; the
operators and missing-data treatments of the API's enums. CloudFormation fails an
``AWS::CloudWatch::Alarm`` with the same error, so a stage whose template holds such an alarm fails to
provision, as its deploy would.

Upstream: no. Not written up yet: the initial state is a one-line fix moto would likely take, the
validation mirrors CloudWatch's rules and messages as observed rather than a published list.

Patches: moto 5.2.5, ``CloudWatchBackend.put_metric_alarm``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PATCHES = {"moto": "5.2.5"}

INITIAL_STATE = "INSUFFICIENT_DATA"
INITIAL_REASON = "Unchecked: Initial alarm creation"
COMPARISON_OPERATORS = (
    "GreaterThanOrEqualToThreshold",
    "GreaterThanThreshold",
    "LessThanThreshold",
    "LessThanOrEqualToThreshold",
    "LessThanLowerOrGreaterThanUpperThreshold",
    "LessThanLowerThreshold",
    "GreaterThanUpperThreshold",
)
MISSING_DATA = ("breaching", "notBreaching", "ignore", "missing")


def refusal(
    *,
    metric_name: str | None,
    metric_data_queries: list[Any] | None,
    comparison_operator: str | None,
    evaluation_periods: int | None,
    datapoints_to_alarm: int | None,
    period: int | None,
    statistic: str | None,
    extended_statistic: str | None,
    treat_missing_data: str | None,
) -> tuple[str, str] | None:
    """(error code, message) CloudWatch answers a PutMetricAlarm with these parameters, or None."""
    if comparison_operator not in COMPARISON_OPERATORS:
        return "ValidationError", (
            f"1 validation error detected: Value '{comparison_operator}' at 'comparisonOperator' failed to "
            f"satisfy constraint: Member must satisfy enum value set: [{', '.join(COMPARISON_OPERATORS)}]"
        )
    if treat_missing_data is not None and treat_missing_data not in MISSING_DATA:
        return "ValidationError", (
            f"Option {treat_missing_data} is not supported. Supported options for parameter "
            "TreatMissingData are breaching, notBreaching, ignore and missing."
        )
    evaluations = int(evaluation_periods or 0)
    if datapoints_to_alarm is not None and int(datapoints_to_alarm) > evaluations:
        return "ValidationError", "DatapointsToAlarm must be less than or equal to EvaluationPeriods"
    if metric_data_queries:
        if metric_name:
            return "InvalidParameterCombination", (
                "The parameters MetricName and Metrics are mutually exclusive and you must specify one."
            )
        return None
    if not metric_name:
        return "ValidationError", "One of MetricName or Metrics must be specified."
    if (statistic is None) == (extended_statistic is None):
        return "InvalidParameterCombination", (
            "Exactly one of the parameters Statistic and ExtendedStatistic must be specified."
        )
    if period is None:
        return "ValidationError", "Period must not be null"
    seconds = int(period)
    if seconds not in (10, 20, 30) and seconds % 60:
        return "ValidationError", "Period must be 10, 30 or a multiple of 60"
    if seconds < 3600 and seconds * evaluations > 86400:
        return "ValidationError", (
            "Metrics cannot be checked across more than a day (EvaluationPeriods * Period must be <= 86400)"
        )
    if seconds * evaluations > 604800:
        return "ValidationError", (
            "Metrics cannot be checked across more than a week (EvaluationPeriods * Period must be <= 604800)"
        )
    return None


def install() -> Callable[[], None]:
    """Install patch 16; returns a function that removes it."""
    from moto.cloudwatch import exceptions
    from moto.cloudwatch.models import CloudWatchBackend

    original = CloudWatchBackend.put_metric_alarm

    def put_metric_alarm(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        # moto serves PutCompositeAlarm through here too (with its AlarmRule): none of these rules apply.
        refused = (
            None
            if kwargs.get("rule")
            else refusal(
                metric_name=kwargs.get("metric_name"),
                metric_data_queries=kwargs.get("metric_data_queries"),
                comparison_operator=kwargs.get("comparison_operator"),
                evaluation_periods=kwargs.get("evaluation_periods"),
                datapoints_to_alarm=kwargs.get("datapoints_to_alarm"),
                period=kwargs.get("period"),
                statistic=kwargs.get("statistic"),
                extended_statistic=kwargs.get("extended_statistic"),
                treat_missing_data=kwargs.get("treat_missing_data"),
            )
        )
        if refused is not None:
            code, message = refused
            error = {
                "ValidationError": exceptions.ValidationError,
                "InvalidParameterCombination": exceptions.InvalidParameterCombination,
            }[code]
            raise error(message)
        before = self.alarms.get(name)
        alarm = original(self, name, *args, **kwargs)
        if before is None:
            alarm.state_value = INITIAL_STATE
            alarm.state_reason = INITIAL_REASON
        else:  # an update overwrites the configuration, never the state
            alarm.state_value = before.state_value
            alarm.state_reason = before.state_reason
            alarm.state_reason_data = before.state_reason_data
            alarm.state_updated_timestamp = before.state_updated_timestamp
            alarm.history = before.history
        return alarm

    CloudWatchBackend.put_metric_alarm = put_metric_alarm  # type: ignore[method-assign]

    def remove() -> None:
        CloudWatchBackend.put_metric_alarm = original  # type: ignore[method-assign]

    return remove
