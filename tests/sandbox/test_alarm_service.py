"""emulator.alarm_service on the emulator: a new alarm starts INSUFFICIENT_DATA; a DLQ alarm honours its
period on the stage's clock (a parked message keeps it in ALARM until a whole period without one has
passed); EMF lines from a function's log and the runtime's invocations become the metrics their alarms
watch; CloudWatch publishes as its service principal, so a topic policy without it gets no notification
and a recorded denial; the control endpoint evaluates on demand; provisioning creates each alarm from
its template, references resolved, and fails on an alarm CloudWatch would refuse. The wall clock is the
test's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from botocore.exceptions import ClientError

from emulator.alarm_service import AlarmService
from emulator.control import ControlServer, evaluate_alarms_remote
from emulator.eventbridge import EventBridge
from emulator.iam_report import denials, enforce
from emulator.provision import IamModel, Provisioner, Topology
from emulator.server import Emulator, client, free_port
from emulator.templates import Stack

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    emulator = Emulator(free_port())
    emulator.start()
    try:
        yield emulator.endpoint
    finally:
        emulator.stop()


class Clock:
    def __init__(self) -> None:
        self.at = T0

    def __call__(self) -> datetime:
        return self.at


@pytest.fixture
def world(endpoint: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    name = request.node.name.replace("[", "-").replace("]", "")[:40]
    sqs, sns = client("sqs", endpoint), client("sns", endpoint)
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    inbox = sqs.create_queue(QueueName=f"{name}-inbox")["QueueUrl"]
    inbox_arn = sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    topic = sns.create_topic(Name=f"{name}-alarms")["TopicArn"]
    sns.subscribe(
        TopicArn=topic, Protocol="sqs", Endpoint=inbox_arn, Attributes={"RawMessageDelivery": "true"}
    )
    return {
        "name": name,
        "sqs": sqs,
        "cw": client("cloudwatch", endpoint),
        "dlq": dlq,
        "inbox": inbox,
        "topic": topic,
    }


def _alarm(w: dict[str, Any], suffix: str, **metric: Any) -> str:
    name = f"{w['name']}{suffix}"
    w["cw"].put_metric_alarm(
        AlarmName=name,
        Period=60,
        Threshold=0,
        ComparisonOperator="GreaterThanThreshold",
        EvaluationPeriods=1,
        TreatMissingData="notBreaching",
        AlarmActions=[w["topic"]],
        OKActions=[w["topic"]],
        **metric,
    )
    return name


def _dlq_alarm(w: dict[str, Any]) -> str:
    return _alarm(
        w,
        "DlqNotEmpty",
        Namespace="AWS/SQS",
        MetricName="ApproximateNumberOfMessagesVisible",
        Dimensions=[{"Name": "QueueName", "Value": f"{w['name']}-dlq"}],
        Statistic="Maximum",
    )


def _state(w: dict[str, Any], name: str) -> str:
    return str(w["cw"].describe_alarms(AlarmNames=[name])["MetricAlarms"][0]["StateValue"])


def _notified(w: dict[str, Any]) -> list[tuple[str, str]]:
    got = w["sqs"].receive_message(QueueUrl=w["inbox"], MaxNumberOfMessages=10, WaitTimeSeconds=1)
    notes = [json.loads(m["Body"]) for m in got.get("Messages", [])]
    for m in got.get("Messages", []):
        w["sqs"].delete_message(QueueUrl=w["inbox"], ReceiptHandle=m["ReceiptHandle"])
    return [(n["AlarmName"], n["NewStateValue"]) for n in notes]


def _service(endpoint: str, log_dir: Path, functions: tuple[str, ...] = ()) -> tuple[AlarmService, Clock]:
    clock = Clock()
    return AlarmService(endpoint, log_dir, functions, every=3600, log=lambda _: None, wall_clock=clock), clock


def test_a_dlq_alarm_starts_insufficient_data_and_honours_its_period_on_the_stages_clock(
    endpoint: str, world: dict[str, Any], tmp_path: Path
) -> None:
    name = _dlq_alarm(world)
    assert _state(world, name) == "INSUFFICIENT_DATA"  # as CloudWatch makes it (patch 16)
    service, clock = _service(endpoint, tmp_path)

    service.evaluate()
    assert _state(world, name) == "OK"
    assert _notified(world) == [(name, "OK")]  # INSUFFICIENT_DATA -> OK runs the OK actions

    world["sqs"].send_message(QueueUrl=world["dlq"], MessageBody="parked")
    clock.at += timedelta(seconds=5)
    assert [(c.old, c.new) for c in service.evaluate()] == [("OK", "ALARM")]
    assert _notified(world) == [(name, "ALARM")]

    world["sqs"].purge_queue(QueueUrl=world["dlq"])
    service.evaluate(advance=30)  # the period still holds the sample that saw the message
    assert _state(world, name) == "ALARM"
    service.evaluate(advance=31)  # a whole period of an empty DLQ
    assert _state(world, name) == "OK"
    assert _notified(world) == [(name, "OK")]
    assert service.now() == T0 + timedelta(seconds=66)
    written = (tmp_path / "alarms.log").read_text().splitlines()
    assert [line.split(": ", 1)[1].split(" (")[0] for line in written] == [
        "INSUFFICIENT_DATA -> OK",
        "OK -> ALARM",
        "ALARM -> OK",
    ]
    assert written[1].startswith(f"{(T0 + timedelta(seconds=5)).isoformat()} {name}: ")
    with pytest.raises(ValueError, match="only moves forward"):
        service.evaluate(advance=-1)


def test_emf_lines_and_invocations_become_the_metrics_their_alarms_watch(
    endpoint: str, world: dict[str, Any], tmp_path: Path
) -> None:
    conflicts = _alarm(
        world,
        "PayloadConflicts",
        Namespace="Relay",
        MetricName="PayloadConflict",
        Dimensions=[{"Name": "service", "Value": world["name"]}],
        Statistic="Sum",
    )
    errors = _alarm(
        world,
        "Errors",
        Namespace="AWS/Lambda",
        MetricName="Errors",
        Dimensions=[{"Name": "FunctionName", "Value": f"{world['name']}-fn"}],
        Statistic="Sum",
    )
    log = tmp_path / f"{world['name']}-fn.log"

    def emf(value: int) -> str:
        return json.dumps(
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
                "service": world["name"],
                "PayloadConflict": value,
            }
        )

    log.write_text(emf(1) + "\n")  # another run's line: read from the end at start
    service, clock = _service(endpoint, tmp_path, (f"{world['name']}-fn",))
    service.record_invocation(f"{world['name']}-fn", ok=True)
    service.evaluate()
    assert (_state(world, conflicts), _state(world, errors)) == ("OK", "OK")

    with log.open("a") as handle:
        handle.write('{"level":"INFO","message":"not a metric"}\n' + emf(1) + "\n" + emf(1)[:20])
    service.record_invocation(f"{world['name']}-fn", ok=False)
    clock.at += timedelta(seconds=1)
    changes = {c.alarm: c.new for c in service.evaluate()}
    assert changes == {conflicts: "ALARM", errors: "ALARM"}
    assert "1 out of the last 1 datapoints [1.0" in service.transitions[-1][1].reason


def test_cloudwatch_publishes_as_its_service_principal_and_a_policy_without_it_gets_nothing(
    endpoint: str, world: dict[str, Any], tmp_path: Path
) -> None:
    name = _dlq_alarm(world)
    only_events = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "events.amazonaws.com"},
                "Action": "sns:Publish",
                "Resource": world["topic"],
            }
        ],
    }
    enforce(
        endpoint,
        Topology(),
        IamModel(resource_policies={world["topic"]: [{"name": "p", "document": only_events}]}),
    )
    try:
        service, _ = _service(endpoint, tmp_path)
        service.evaluate()
        recorded = denials(endpoint)  # a new model starts a new record
    finally:
        enforce(endpoint, Topology(), IamModel())
    assert _state(world, name) == "OK"  # the state changes; the action fails, as CloudWatch's would
    assert _notified(world) == []
    assert service.evaluator.failed_actions == [f"{name} OK: not allowed to publish to {world['topic']}"]
    (denial,) = recorded
    assert denial["action"] == "sns:Publish" and "cloudwatch.amazonaws.com" in denial["function"]


def test_the_control_endpoint_evaluates_on_demand_and_refuses_to_go_back_in_time(
    endpoint: str, world: dict[str, Any], tmp_path: Path
) -> None:
    name = _dlq_alarm(world)
    service, _ = _service(endpoint, tmp_path)
    control = ControlServer(cast(EventBridge, None), alarms=service)
    url = control.start()
    try:
        status, answer = evaluate_alarms_remote(url, advance=-5)
        assert status == 400 and "advance" in answer["message"]
        status, answer = evaluate_alarms_remote(url, advance=61)
    finally:
        control.close()
    assert status == 200
    assert {"alarm": name, "old": "INSUFFICIENT_DATA", "new": "OK"}.items() <= next(
        t for t in answer["transitions"] if t["alarm"] == name
    ).items()
    assert answer["now"] == (T0 + timedelta(seconds=61)).isoformat(timespec="milliseconds")


def _stack(name: str, **alarm: Any) -> Stack:
    resources = {
        "Dlq": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": f"{name}-dlq"}},
        "AlarmTopic": {"Type": "AWS::SNS::Topic", "Properties": {"TopicName": f"{name}-alarms"}},
        "DlqNotEmpty": {
            "Type": "AWS::CloudWatch::Alarm",
            "Properties": {
                "AlarmDescription": "parked: `python -m ops status`",
                "Namespace": "AWS/SQS",
                "MetricName": "ApproximateNumberOfMessagesVisible",
                "Dimensions": [{"Name": "QueueName", "Value": {"Fn::GetAtt": ["Dlq", "QueueName"]}}],
                "Period": 60,
                "Statistic": "Maximum",
                "Threshold": 0,
                "ComparisonOperator": "GreaterThanThreshold",
                "EvaluationPeriods": 1,
                "TreatMissingData": "notBreaching",
                "AlarmActions": [{"Ref": "AlarmTopic"}],
                "OKActions": [{"Ref": "AlarmTopic"}],
                **alarm,
            },
        },
    }
    return Stack(name, {"Resources": resources}, Path(f"{name}.template.json"))


def test_provisioning_creates_each_alarm_from_its_template_and_refuses_what_cloudwatch_refuses(
    endpoint: str, tmp_path: Path
) -> None:
    topology = Provisioner(endpoint, tmp_path).provision([_stack("alarm-prov")])
    assert topology.alarms == ["alarm-prov-DlqNotEmpty"]
    (alarm,) = client("cloudwatch", endpoint).describe_alarms(AlarmNames=topology.alarms)["MetricAlarms"]
    assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": "alarm-prov-dlq"}]  # GetAtt resolved
    assert alarm["AlarmActions"] == alarm["OKActions"] == [topology.topics["alarm-prov-alarms"]]  # Ref
    assert alarm["StateValue"] == "INSUFFICIENT_DATA" and alarm["Period"] == 60

    with pytest.raises(ClientError) as refused:
        Provisioner(endpoint, tmp_path).provision([_stack("alarm-bad", Period=45)])
    error = refused.value.response["Error"]
    assert error["Code"] == "ValidationError"
    assert error["Message"] == "Period must be 10, 30 or a multiple of 60"
    with pytest.raises(ValueError, match="Encountered unsupported property Periods"):
        Provisioner(endpoint, tmp_path).provision([_stack("alarm-typo", Periods=60)])


def test_rule_failures_become_eventbridges_metrics_with_its_dimensions(
    endpoint: str, world: dict[str, Any], tmp_path: Path
) -> None:
    """EventBridge reports a custom-bus rule's metrics under EventBusName + RuleName; an alarm that names
    the rule by its CloudFormation Ref (``bus|rule``) watches a metric nothing emits, here as on AWS."""
    rule = f"{world['name']}-rule"
    by_bus = _alarm(
        world,
        "FailedInvocations",
        Namespace="AWS/Events",
        MetricName="FailedInvocations",
        Dimensions=[{"Name": "EventBusName", "Value": "app"}, {"Name": "RuleName", "Value": rule}],
        Statistic="Sum",
    )
    by_ref = _alarm(
        world,
        "FailedByRef",
        Namespace="AWS/Events",
        MetricName="FailedInvocations",
        Dimensions=[{"Name": "RuleName", "Value": f"app|{rule}"}],
        Statistic="Sum",
    )
    to_dlq = _alarm(
        world,
        "SentToDlq",
        Namespace="AWS/Events",
        MetricName="InvocationsSentToDlq",
        Dimensions=[{"Name": "EventBusName", "Value": "app"}, {"Name": "RuleName", "Value": rule}],
        Statistic="Sum",
    )
    counts = {("app", rule): (0, 0)}
    service, clock = _service(endpoint, tmp_path)
    service.rule_failures = lambda: counts
    service.evaluate()
    assert {_state(world, a) for a in (by_bus, by_ref, to_dlq)} == {"OK"}

    counts[("app", rule)] = (2, 1)  # two events failed for good, one of them dead-lettered
    clock.at += timedelta(seconds=1)
    assert {c.alarm: c.new for c in service.evaluate()} == {by_bus: "ALARM", to_dlq: "ALARM"}
    assert _state(world, by_ref) == "OK"

    service.evaluate(advance=60)  # no new failure in the last period
    assert {_state(world, a) for a in (by_bus, by_ref, to_dlq)} == {"OK"}
