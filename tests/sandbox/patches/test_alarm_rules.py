"""Patch 16 (``emulator.patches.alarm_rules``): a new alarm starts INSUFFICIENT_DATA and an update keeps its
state, as CloudWatch does; PutMetricAlarm refuses what CloudWatch refuses, with its errors."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from emulator.patches import alarm_rules
from tests.sandbox.patches.support import installed

DLQ_ALARM: dict[str, Any] = {
    "AlarmName": "DlqNotEmpty",
    "Namespace": "AWS/SQS",
    "MetricName": "ApproximateNumberOfMessagesVisible",
    "Dimensions": [{"Name": "QueueName", "Value": "work-dlq"}],
    "Period": 60,
    "Statistic": "Maximum",
    "Threshold": 0,
    "ComparisonOperator": "GreaterThanThreshold",
    "EvaluationPeriods": 1,
    "TreatMissingData": "notBreaching",
}


def _state(cw: Any) -> tuple[str, str]:
    alarm = cw.describe_alarms(AlarmNames=["DlqNotEmpty"])["MetricAlarms"][0]
    return alarm["StateValue"], alarm["StateReason"]


def test_a_new_alarm_starts_insufficient_data_and_an_update_keeps_its_state() -> None:
    with mock_aws():
        cw = boto3.client("cloudwatch", region_name="us-east-1")
        cw.put_metric_alarm(**DLQ_ALARM)
        assert _state(cw)[0] == "OK"  # moto's: as if it had been evaluated already
    with installed(alarm_rules.install), mock_aws():
        cw = boto3.client("cloudwatch", region_name="us-east-1")
        cw.put_metric_alarm(**DLQ_ALARM)
        assert _state(cw) == ("INSUFFICIENT_DATA", "Unchecked: Initial alarm creation")
        cw.set_alarm_state(AlarmName="DlqNotEmpty", StateValue="ALARM", StateReason="parked")
        cw.put_metric_alarm(**{**DLQ_ALARM, "Threshold": 5})
        assert _state(cw) == ("ALARM", "parked")
        assert cw.describe_alarms(AlarmNames=["DlqNotEmpty"])["MetricAlarms"][0]["Threshold"] == 5


@pytest.mark.parametrize(
    ("change", "code", "message"),
    [
        ({"Period": 45}, "ValidationError", "Period must be 10, 30 or a multiple of 60"),
        (
            {"EvaluationPeriods": 2, "DatapointsToAlarm": 3},
            "ValidationError",
            "DatapointsToAlarm must be less than or equal to EvaluationPeriods",
        ),
        ({"EvaluationPeriods": 1441}, "ValidationError", "across more than a day"),
        ({"ComparisonOperator": "Above"}, "ValidationError", "at 'comparisonOperator' failed to satisfy"),
        ({"TreatMissingData": "zero"}, "ValidationError", "Option zero is not supported"),
        ({"ExtendedStatistic": "p99"}, "InvalidParameterCombination", "Statistic and ExtendedStatistic"),
    ],
)
def test_put_metric_alarm_refuses_what_cloudwatch_refuses(
    change: dict[str, Any], code: str, message: str
) -> None:
    with mock_aws():
        boto3.client("cloudwatch", region_name="us-east-1").put_metric_alarm(**{**DLQ_ALARM, **change})
    with installed(alarm_rules.install), mock_aws():
        cw = boto3.client("cloudwatch", region_name="us-east-1")
        with pytest.raises(ClientError) as raised:
            cw.put_metric_alarm(**{**DLQ_ALARM, **change})
        assert raised.value.response["Error"]["Code"] == code
        assert message in raised.value.response["Error"]["Message"]
        assert cw.describe_alarms()["MetricAlarms"] == []
