"""Scheduler schedules whose templated target is an SQS queue (CDK's ``SqsSendMessage``): provisioned
from the template (network-free, moto's ``mock_aws``), fired by ``emulator.eventbridge`` against a real
moto server with IAM enforced (SendMessage of the substituted ``Input`` as the schedule's own role;
retried per its ``RetryPolicy``, then its DLQ with Scheduler's attributes), reported by the control
endpoint and ``fire-schedule``; and the accelerated clock, which replays hourly schedules but fires
sub-hourly ones on real time only."""

from __future__ import annotations

import functools
import json
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from moto import mock_aws

from emulator import eventbridge, iam_enforcer
from emulator.control import ControlServer, fire_remote
from emulator.eventbridge import EventBridge, Firing, SchedulerClock, fires_more_than_hourly, iso
from emulator.iam_report import denials, enforce, fetch_report
from emulator.provision import Provisioner, RetryPolicy, ScheduleSpec, Topology
from emulator.server import ACCOUNT_ID, REGION, client
from emulator.templates import Stack
from local.__main__ import firing_report
from tests.sandbox.moto_server import moto_server as serve_moto

STACK = "SchedSqs"
SCHEDULE = "tick"
QUEUE = "SchedSqs-Work"
DLQ = "SchedSqs-TickDlq"
ROLE = "SchedSqs-TickRole"
QUEUE_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{QUEUE}"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT_ID}:role/{ROLE}"
BUS_ARN = f"arn:aws:events:{REGION}:{ACCOUNT_ID}:event-bus/default"
PUT_EVENTS = {"Action": "events:PutEvents", "Effect": "Allow", "Resource": BUS_ARN}
# What CDK's SqsSendMessage(input=ScheduleTargetInput.from_object({...})) puts in Target.Input.
INPUT = json.dumps(
    {
        "at": "<aws.scheduler.scheduled-time>",
        "execution": "<aws.scheduler.execution-id>",
        "schedule": "<aws.scheduler.schedule-arn>",
        "attempt": "<aws.scheduler.attempt-number>",
    },
    separators=(",", ":"),
)


def get_att(logical_id: str, attribute: str = "Arn") -> dict[str, list[str]]:
    return {"Fn::GetAtt": [logical_id, attribute]}


def send_grant(*queues: str) -> dict[str, Any]:
    return {"Action": "sqs:SendMessage", "Effect": "Allow", "Resource": [get_att(q) for q in queues]}


def sqs_schedule_stack(
    *,
    target: Any = None,
    granted: tuple[str, ...] = ("Work", "TickDlq"),
    also: tuple[dict[str, Any], ...] = (),
    retry_attempts: int = 1,
    sqs_parameters: dict[str, Any] | None = None,
    event_bridge_parameters: dict[str, str] | None = None,
) -> Stack:
    """The resources ``Schedule(target=SqsSendMessage(queue, input=..., dead_letter_queue=dlq,
    retry_attempts=..., max_event_age=1 h))`` synthesizes (checked against cdk synth of aws-cdk-lib
    2.275): the schedule, its execution role with a DefaultPolicy granting sqs:SendMessage on
    ``granted`` (and the statements ``also``), the target queue and the DLQ."""
    resources: dict[str, Any] = {
        "Work": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": QUEUE}},
        "TickDlq": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": DLQ}},
        "TickRole": {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "RoleName": ROLE,
                "AssumeRolePolicyDocument": {
                    "Statement": [
                        {
                            "Action": "sts:AssumeRole",
                            "Effect": "Allow",
                            "Principal": {"Service": "scheduler.amazonaws.com"},
                        }
                    ],
                    "Version": "2012-10-17",
                },
            },
        },
        "TickRoleDefaultPolicy": {
            "Type": "AWS::IAM::Policy",
            "Properties": {
                "PolicyDocument": {"Statement": [send_grant(*granted), *also], "Version": "2012-10-17"},
                "PolicyName": "TickRoleDefaultPolicy",
                "Roles": [{"Ref": "TickRole"}],
            },
        },
        "Tick": {
            "Type": "AWS::Scheduler::Schedule",
            "Properties": {
                "Name": SCHEDULE,
                "FlexibleTimeWindow": {"Mode": "OFF"},
                "ScheduleExpression": "rate(5 minutes)",
                "ScheduleExpressionTimezone": "Etc/UTC",
                "State": "ENABLED",
                "Target": {
                    "Arn": target if target is not None else get_att("Work"),
                    "DeadLetterConfig": {"Arn": get_att("TickDlq")},
                    "Input": INPUT,
                    "RetryPolicy": {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": retry_attempts},
                    "RoleArn": get_att("TickRole"),
                    **(
                        {"EventBridgeParameters": event_bridge_parameters}
                        if event_bridge_parameters
                        else {"SqsParameters": sqs_parameters or {}}
                    ),
                },
            },
        },
    }
    return Stack(STACK, {"Resources": resources}, Path(f"{STACK}.template.json"))


# -- provisioning (network-free) --------------------------------------------------------------------


AwsClients = Callable[[str], Any]


@pytest.fixture
def in_process_aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[AwsClients]:
    """One boto3 client per service on moto's in-process ``mock_aws``, as the handler tests use."""
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    with mock_aws():
        yield functools.cache(lambda service: client(service, None))


def provision_in_process(aws: AwsClients, stack: Stack, tmp_path: Path) -> Topology:
    return Provisioner(None, tmp_path, clients=aws).provision([stack])


def test_a_schedule_targeting_a_queue_is_provisioned_as_an_sqs_target_with_its_role_retry_and_dlq(
    in_process_aws: AwsClients, tmp_path: Path
) -> None:
    topology = provision_in_process(in_process_aws, sqs_schedule_stack(retry_attempts=3), tmp_path)

    assert not [k for k in topology.skipped if "Schedule" in k], topology.skipped
    (spec,) = topology.schedules
    assert (spec.target_kind, spec.target_arn, spec.target_name) == ("sqs", QUEUE_ARN, QUEUE)
    assert spec.queue_url == topology.queues[QUEUE]
    assert spec.input == INPUT
    assert spec.retry == RetryPolicy(maximum_retry_attempts=3, maximum_event_age_seconds=3600)
    assert spec.dlq_arn == f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{DLQ}" and DLQ in topology.dlqs
    assert spec.message_group_id is None
    # The send is IAM-checked as the schedule's execution role.
    assert spec.role_arn == ROLE_ARN
    assert topology.iam.caller_roles[spec.caller] == ROLE_ARN
    # Created in the emulator too, so `aws scheduler get-schedule` shows it.
    stored = in_process_aws("scheduler").get_schedule(Name=SCHEDULE)
    assert stored["Target"]["Arn"] == QUEUE_ARN


def test_a_fifo_queue_targets_message_group_id_is_kept_for_the_send(
    in_process_aws: AwsClients, tmp_path: Path
) -> None:
    stack = sqs_schedule_stack(sqs_parameters={"MessageGroupId": "ticks"})
    (spec,) = provision_in_process(in_process_aws, stack, tmp_path).schedules
    assert spec.message_group_id == "ticks"


def test_an_event_bus_schedule_is_still_a_put_events_target(
    in_process_aws: AwsClients, tmp_path: Path
) -> None:
    stack = sqs_schedule_stack(target=BUS_ARN, event_bridge_parameters={"Source": "s", "DetailType": "d"})
    (spec,) = provision_in_process(in_process_aws, stack, tmp_path).schedules
    assert (spec.target_kind, spec.target_name, spec.queue_url) == ("event-bus", "default", "")
    assert (spec.source, spec.detail_type) == ("s", "d")


@pytest.mark.parametrize(
    ("target", "why"),
    [
        (f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:f", "only event-bus (PutEvents) and SQS queue"),
        (f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:not-in-the-templates", "not declared by the templates"),
    ],
)
def test_a_schedule_the_sandbox_cannot_fire_is_reported_with_the_reason(
    in_process_aws: AwsClients, tmp_path: Path, target: str, why: str
) -> None:
    topology = provision_in_process(in_process_aws, sqs_schedule_stack(target=target), tmp_path)
    assert topology.schedules == []
    assert why in topology.skipped["AWS::Scheduler::Schedule Tick"]


# -- firing, against a moto server with IAM enforced ----------------------------------------------------


@pytest.fixture(scope="module")
def moto_server() -> Iterator[str]:
    with serve_moto(iam_enforcer.install) as url:
        yield url


@dataclass
class World:
    endpoint: str
    topology: Topology
    bridge: EventBridge
    log: list[str]

    @property
    def spec(self) -> ScheduleSpec:
        (spec,) = self.topology.schedules
        return spec

    def receive(self, queue: str) -> list[dict[str, Any]]:
        sqs = client("sqs", self.endpoint)
        found = sqs.receive_message(
            QueueUrl=self.topology.queues[queue], MaxNumberOfMessages=10, MessageAttributeNames=["All"]
        )
        return list(found.get("Messages", []))

    def schedule_calls(self) -> dict[str, int]:
        (entry,) = [f for f in fetch_report(self.endpoint)["functions"] if f["function"] == self.spec.caller]
        assert entry["role"] == ROLE_ARN
        return dict(entry["calls"])


BuildWorld = Callable[[Stack], World]


@pytest.fixture
def world(moto_server: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[BuildWorld]:
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    urllib.request.urlopen(urllib.request.Request(f"{moto_server}/moto-api/reset", method="POST")).read()
    bridges: list[EventBridge] = []

    def build(stack: Stack) -> World:
        topology = Provisioner(moto_server, tmp_path).provision([stack])
        enforce(moto_server, topology)
        log: list[str] = []
        bridge = EventBridge(
            topology,
            moto_server,
            apis=[],
            local_api_url="http://127.0.0.1:9",
            fast_clock=True,
            log=log.append,
        )
        bridges.append(bridge)
        return World(moto_server, topology, bridge, log)

    yield build
    for bridge in bridges:
        bridge.close()


def test_firing_sends_the_substituted_input_to_the_queue_as_the_schedules_role(world: BuildWorld) -> None:
    w = world(sqs_schedule_stack())

    (firing,) = w.bridge.fire_schedule(SCHEDULE, "2026-11-29T10:05:00Z")

    assert (firing.error, firing.dead_lettered, firing.target_kind) == ("", False, "sqs")
    assert firing.message_id and firing.event_id is None
    assert firing.deliveries == []  # a queue is not a bus: no rule sees it
    (message,) = w.receive(QUEUE)
    assert message["MessageId"] == firing.message_id
    body = json.loads(message["Body"])
    assert body["execution"] and "<aws.scheduler" not in message["Body"]
    assert body == {
        "at": "2026-11-29T10:05:00Z",
        "execution": body["execution"],
        "schedule": w.spec.arn,
        "attempt": "1",
    }
    assert w.receive(DLQ) == []
    assert w.schedule_calls() == {f"sqs:SendMessage {QUEUE_ARN}": 1}


def test_a_send_to_a_deleted_queue_is_retried_then_dead_lettered_with_schedulers_attributes(
    world: BuildWorld,
) -> None:
    w = world(sqs_schedule_stack(retry_attempts=1))
    client("sqs", w.endpoint).delete_queue(QueueUrl=w.spec.queue_url)

    (firing,) = w.bridge.fire_schedule(SCHEDULE, "2026-11-29T10:10:00Z")

    assert firing.message_id is None and firing.dead_lettered
    assert firing.error.startswith("AWS.SimpleQueueService.NonExistentQueue: ")
    # MaximumRetryAttempts 1: two sends, both as the schedule's role.
    assert w.schedule_calls()[f"sqs:SendMessage {QUEUE_ARN}"] == 2
    (message,) = w.receive(DLQ)
    attributes = {k: v["StringValue"] for k, v in message["MessageAttributes"].items()}
    body = json.loads(message["Body"])
    assert attributes == {
        "ERROR_CODE": "AWS.SimpleQueueService.NonExistentQueue",
        "ERROR_MESSAGE": attributes["ERROR_MESSAGE"],
        "EXECUTION_ID": body["execution"],
        "SCHEDULE_ARN": w.spec.arn,
        "TARGET_ARN": QUEUE_ARN,
    }
    assert attributes["ERROR_MESSAGE"]
    assert (body["at"], body["attempt"]) == ("2026-11-29T10:10:00Z", "2")  # the last request refused
    assert any("SendMessage to SchedSqs-Work failed" in line for line in w.log)


def test_a_role_without_send_message_on_the_queue_is_denied_and_the_firing_dead_lettered(
    world: BuildWorld,
) -> None:
    w = world(sqs_schedule_stack(granted=("TickDlq",), retry_attempts=0))

    (firing,) = w.bridge.fire_schedule(SCHEDULE, "2026-11-29T10:15:00Z")

    assert firing.error.startswith("AccessDenied: ") and firing.dead_lettered
    assert w.receive(QUEUE) == []
    (message,) = w.receive(DLQ)
    assert message["MessageAttributes"]["ERROR_CODE"]["StringValue"] == "AccessDenied"
    (denial,) = denials(w.endpoint)
    assert (denial["function"], denial["action"]) == (w.spec.caller, "sqs:SendMessage")


@pytest.mark.parametrize("may_put", [True, False], ids=["granted", "denied"])
def test_an_event_bus_schedule_still_puts_its_event_as_its_role_or_dead_letters_the_refusal(
    world: BuildWorld, may_put: bool
) -> None:
    w = world(
        sqs_schedule_stack(
            target=BUS_ARN,
            also=(PUT_EVENTS,) if may_put else (),
            retry_attempts=0,
            event_bridge_parameters={"Source": "relay.tests", "DetailType": "Tick"},
        )
    )

    (firing,) = w.bridge.fire_schedule(SCHEDULE, "2026-11-29T10:30:00Z")

    assert firing.target_kind == "event-bus" and firing.message_id is None
    assert w.receive(QUEUE) == []
    if may_put:
        assert firing.event_id and not firing.error and not firing.dead_lettered
        assert w.schedule_calls() == {f"events:PutEvents {BUS_ARN}": 1}
        assert w.receive(DLQ) == []
    else:
        assert firing.event_id is None and firing.error.startswith("AccessDeniedException: ")
        (message,) = w.receive(DLQ)
        assert message["MessageAttributes"]["ERROR_CODE"]["StringValue"] == "AccessDeniedException"
        assert message["MessageAttributes"]["TARGET_ARN"]["StringValue"] == BUS_ARN


def test_fire_schedule_through_the_control_endpoint_prints_the_message_or_the_failure(
    world: BuildWorld,
) -> None:
    w = world(sqs_schedule_stack(retry_attempts=0))
    control = ControlServer(w.bridge)
    control.start()
    try:
        status, sent = fire_remote(control.url, SCHEDULE, "2026-11-29T10:20:00Z", 5.0)
        client("sqs", w.endpoint).delete_queue(QueueUrl=w.spec.queue_url)
        _, failed = fire_remote(control.url, SCHEDULE, "2026-11-29T10:25:00Z", 5.0)
    finally:
        control.close()

    assert status == 200
    (answer,) = sent["firings"]
    assert (answer["targetKind"], answer["target"], answer["deliveries"]) == ("sqs", QUEUE_ARN, [])
    assert firing_report(sent["firings"]) == (
        [f"{SCHEDULE} @ 2026-11-29T10:20:00Z: message {answer['messageId']} on queue {QUEUE}"],
        0,
    )
    (line,), code = firing_report(failed["firings"])
    assert code == 1
    assert line.startswith(
        f"{SCHEDULE} @ 2026-11-29T10:25:00Z: SendMessage to {QUEUE} failed, sent to the schedule's DLQ "
        "(AWS.SimpleQueueService.NonExistentQueue: "
    )


# -- the clock --------------------------------------------------------------------------------------


def schedule(name: str, expression: str) -> ScheduleSpec:
    return ScheduleSpec(
        name=name,
        arn=f"arn:aws:scheduler:{REGION}:{ACCOUNT_ID}:schedule/default/{name}",
        expression=expression,
        timezone="UTC",
        enabled=True,
        target_arn=QUEUE_ARN,
        source="",
        detail_type="",
        input="{}",
        retry=RetryPolicy(0, 60),
        dlq_arn=None,
    )


class RecordingBridge:
    """Stands in for ``EventBridge``: the clock only reads the schedules and calls ``_fire``."""

    def __init__(self, *specs: ScheduleSpec) -> None:
        self.topology = Topology(schedules=list(specs))

    def _fire(self, spec: ScheduleSpec, moment: datetime) -> Firing:
        return Firing(spec.name, iso(moment), spec.target_arn, spec.target_kind)


@pytest.mark.parametrize(
    ("expression", "sub_hourly"),
    [
        ("rate(5 minutes)", True),
        ("rate(59 minutes)", True),
        ("rate(60 minutes)", False),
        ("rate(1 hour)", False),
        ("rate(90 minutes)", False),
        ("cron(0/15 * * * ? *)", True),
        ("cron(0 * * * ? *)", False),
        ("at(2026-01-05T10:00:00)", False),
    ],
)
def test_a_schedule_is_sub_hourly_when_two_occurrences_can_be_less_than_an_hour_apart(
    expression: str, sub_hourly: bool
) -> None:
    assert fires_more_than_hourly(schedule("s", expression)) is sub_hourly


def run_clock(clock: SchedulerClock, until: Any, timeout: float = 10.0) -> None:
    clock.start()
    try:
        deadline = time.monotonic() + timeout
        while not until() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert until(), "the clock did not get there in time"
    finally:
        clock.close()


def test_the_accelerated_clock_replays_hourly_schedules_but_fires_sub_hourly_ones_on_real_time_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(eventbridge, "TICK_SECONDS", 0.02)
    bridge = RecordingBridge(schedule("hourly", "cron(0 * * * ? *)"), schedule("every-5", "rate(5 minutes)"))
    clock = SchedulerClock(cast(EventBridge, bridge), hour_every=0.01, log=lambda _: None)
    started = clock.real_now
    this_hour = started.replace(minute=0, second=0, microsecond=0)
    assert "not replayed, on real time only (they fire more than once an hour): every-5" in clock.describe()

    run_clock(clock, lambda: clock.virtual_now >= this_hour)

    hourly = [f.scheduled_time for f in clock.fired if f.schedule == "hourly"]
    assert hourly[:24] == [iso(this_hour - timedelta(hours=h)) for h in range(23, -1, -1)]
    # No past occurrence of the 5-minute schedule: 24 replayed hours would have been 288 firings.
    assert all(f.scheduled_time >= iso(started) for f in clock.fired if f.schedule == "every-5")


def test_the_real_time_clock_fires_a_sub_hourly_schedule_on_each_occurrence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(eventbridge, "TICK_SECONDS", 0.02)
    clock = SchedulerClock(
        cast(EventBridge, RecordingBridge(schedule("every-5", "rate(5 minutes)"))), hour_every=None
    )
    assert clock.real_time_only == set()
    # As if the clock had been running for the last 10 minutes: its next tick fires what fell due.
    clock.virtual_now = datetime.now(UTC) - timedelta(minutes=10)
    since = clock.virtual_now

    run_clock(clock, lambda: len(clock.fired) >= 2)

    moments = [datetime.fromisoformat(f.scheduled_time.replace("Z", "+00:00")) for f in clock.fired]
    assert all(since < m <= datetime.now(UTC) and m.timestamp() % 300 == 0 for m in moments)


def test_closing_the_clock_mid_firing_ends_its_thread_quietly_and_fires_nothing_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stage that stops while its clock is putting an event: that call fails (the emulator is going
    away), which ends the thread without an error, and no later occurrence is fired."""
    monkeypatch.setattr(eventbridge, "TICK_SECONDS", 0.02)
    escaped: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: escaped.append(args.exc_value))
    firing = threading.Event()

    class ClosingBridge(RecordingBridge):
        calls = 0

        def _fire(self, spec: ScheduleSpec, moment: datetime) -> Firing:
            ClosingBridge.calls += 1
            firing.set()
            clock._stop.wait(5)  # held open until the stage closes
            raise ConnectionError("the emulator is gone")

    clock = SchedulerClock(
        cast(EventBridge, ClosingBridge(schedule("hourly", "cron(0 * * * ? *)"))), hour_every=0.01
    )
    clock.start()
    assert firing.wait(5), "the clock never fired"
    clock.close()

    assert clock._thread is not None and not clock._thread.is_alive()
    assert escaped == [] and ClosingBridge.calls == 1 and clock.fired == []
