"""emulator.alarms: a DLQ alarm as the monitoring construct synthesizes it goes to ALARM when a message is
parked, publishes CloudWatch's notification to its topic, and returns to OK once the DLQ is empty; the
evaluator runs on the test's clock (``evaluate(now)``), never on wall-clock minutes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from emulator.alarms import AlarmEvaluator, MetricStore
from emulator.server import REGION, free_port

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=(port := free_port()), verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def _client(service: str, endpoint: str) -> Any:
    return boto3.client(  # type: ignore[call-overload]  # the service is a parameter
        service, endpoint_url=endpoint, region_name=REGION, aws_access_key_id="t", aws_secret_access_key="t"
    )


@pytest.fixture
def world(endpoint: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    name = request.node.name[:40]
    sqs, sns, cw = (_client(s, endpoint) for s in ("sqs", "sns", "cloudwatch"))
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    inbox = sqs.create_queue(QueueName=f"{name}-inbox")["QueueUrl"]
    inbox_arn = sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    topic = sns.create_topic(Name=f"{name}-alarms")["TopicArn"]
    sns.subscribe(
        TopicArn=topic, Protocol="sqs", Endpoint=inbox_arn, Attributes={"RawMessageDelivery": "true"}
    )
    cw.put_metric_alarm(
        AlarmName=f"{name}DlqNotEmpty",
        AlarmDescription="parked: python -m ops dlq redrive",
        Namespace="AWS/SQS",
        MetricName="ApproximateNumberOfMessagesVisible",
        Dimensions=[{"Name": "QueueName", "Value": f"{name}-dlq"}],
        Period=60,
        Statistic="Maximum",
        Threshold=0,
        ComparisonOperator="GreaterThanThreshold",
        EvaluationPeriods=1,
        TreatMissingData="notBreaching",
        AlarmActions=[topic],
        OKActions=[topic],
    )
    return {"sqs": sqs, "cw": cw, "sns": sns, "dlq": dlq, "inbox": inbox, "alarm": f"{name}DlqNotEmpty"}


def _notifications(w: dict[str, Any]) -> list[dict[str, Any]]:
    got = w["sqs"].receive_message(QueueUrl=w["inbox"], MaxNumberOfMessages=10, WaitTimeSeconds=1)
    return [json.loads(m["Body"]) for m in got.get("Messages", [])]


def _state(w: dict[str, Any]) -> str:
    return str(w["cw"].describe_alarms(AlarmNames=[w["alarm"]])["MetricAlarms"][0]["StateValue"])


def test_dlq_alarm_goes_to_alarm_when_a_message_is_parked_and_back_to_ok_when_drained(
    world: dict[str, Any],
) -> None:
    evaluator = AlarmEvaluator(world["cw"], world["sns"], world["sqs"])
    evaluator.evaluate(T0)  # an empty DLQ: moto's new alarm starts OK, and stays so
    assert _state(world) == "OK"
    assert _notifications(world) == []

    world["sqs"].send_message(QueueUrl=world["dlq"], MessageBody="poison")
    changes = evaluator.evaluate(T0 + timedelta(seconds=60))
    assert [(c.old, c.new) for c in changes] == [("OK", "ALARM")]
    assert _state(world) == "ALARM"
    (note,) = _notifications(world)
    assert note["AlarmName"] == world["alarm"]
    assert note["OldStateValue"] == "OK"
    assert note["Trigger"]["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert note["Trigger"]["Dimensions"] == [
        {"value": world["alarm"].removesuffix("DlqNotEmpty") + "-dlq", "name": "QueueName"}
    ]

    world["sqs"].purge_queue(QueueUrl=world["dlq"])
    evaluator.evaluate(T0 + timedelta(seconds=120))
    assert _state(world) == "OK"
    assert [n["NewStateValue"] for n in _notifications(world)] == ["OK"]


def test_metric_math_alarm_is_reported_not_understood(world: dict[str, Any]) -> None:
    world["cw"].put_metric_alarm(
        AlarmName="MathAlarm",
        ComparisonOperator="GreaterThanThreshold",
        EvaluationPeriods=1,
        Threshold=0,
        Metrics=[{"Id": "e", "Expression": "SUM(METRICS())", "ReturnData": True}],
    )
    evaluator = AlarmEvaluator(world["cw"], world["sns"], world["sqs"])
    evaluator.evaluate(T0)
    assert "metric math" in evaluator.not_understood["MathAlarm"]
    world["cw"].delete_alarms(AlarmNames=["MathAlarm"])


def test_emf_line_becomes_datapoints_per_dimension_set() -> None:
    line = json.dumps(
        {
            "_aws": {
                "Timestamp": int(T0.timestamp() * 1000),
                "CloudWatchMetrics": [
                    {
                        "Namespace": "Relay",
                        "Dimensions": [["service"]],
                        "Metrics": [{"Name": "PayloadConflict"}],
                    }
                ],
            },
            "service": "payments",
            "PayloadConflict": 1,
        }
    )
    store = MetricStore()
    assert store.ingest_emf(line) == 1
    assert store.ingest_emf("not json") == 0
    assert store.values(
        "Relay", "PayloadConflict", {"service": "payments"}, T0 - timedelta(seconds=1), T0
    ) == [1.0]


@pytest.mark.parametrize(("treat", "expected"), [("breaching", "ALARM"), ("missing", "INSUFFICIENT_DATA")])
def test_missing_data_is_treated_as_the_alarm_says(world: dict[str, Any], treat: str, expected: str) -> None:
    world["cw"].put_metric_alarm(
        AlarmName=f"Quiet{treat}",
        Namespace="Relay",
        MetricName="NeverEmitted",
        Period=60,
        Statistic="Sum",
        Threshold=0,
        ComparisonOperator="GreaterThanThreshold",
        EvaluationPeriods=1,
        TreatMissingData=treat,
    )
    evaluator = AlarmEvaluator(world["cw"], world["sns"], world["sqs"])
    evaluator.evaluate(T0)
    state = world["cw"].describe_alarms(AlarmNames=[f"Quiet{treat}"])["MetricAlarms"][0]["StateValue"]
    world["cw"].delete_alarms(AlarmNames=[f"Quiet{treat}"])
    assert state == expected
