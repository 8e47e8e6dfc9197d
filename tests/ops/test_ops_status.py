"""ops status: depths, oldest age, alarms and mappings, and never a receive."""

from __future__ import annotations

import json
import sys
import types
import urllib.error
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ops.__main__ import main
from ops.app import App
from ops.status import CloudWatchAges, QueueAge, SandboxAges, render, take_snapshot
from tests.ops.world import Deployed, park, receive_all


def test_status_counts_every_queue_and_dlq_without_receiving_a_message(
    payments: App, capsys: pytest.CaptureFixture[str]
) -> None:
    park(payments, "payments-payment-requests")
    park(payments, "payments-payment-requests")
    source = payments.find_queue("payments-payment-requests", dlq=False)
    payments.client("sqs").send_message(QueueUrl=source.url, MessageBody="{}")

    assert main(["status"]) == 0
    assert main(["status", "--json"]) == 0

    text, document = capsys.readouterr().out.split("\n{", 1)
    assert "payments-payment-requests-dlq" in text and "<- parked" in text
    snapshot = json.loads("{" + document)
    dlq = next(q for q in snapshot["dlqs"] if q["name"].endswith("payments-payment-requests-dlq"))
    assert (dlq["visible"], dlq["inFlight"], dlq["delayed"]) == (2, 0, 0)
    queue = next(q for q in snapshot["queues"] if q["name"].endswith("payments-payment-requests"))
    assert queue["visible"] == 1
    # Nothing was received by either look: each message's first receive is this one.
    for message in receive_all(payments, source.dlq.url if source.dlq else "") + receive_all(
        payments, source.url
    ):
        assert message["Attributes"]["ApproximateReceiveCount"] == "1"


def test_on_aws_the_oldest_age_is_cloudwatchs_latest_datapoint_and_says_how_old(payments: App) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    payments.client("cloudwatch").put_metric_data(
        Namespace="AWS/SQS",
        MetricData=[
            {
                "MetricName": "ApproximateAgeOfOldestMessage",
                "Dimensions": [{"Name": "QueueName", "Value": "relay-dev-payments-payment-requests"}],
                "Value": value,
                "Timestamp": now - timedelta(minutes=minutes),
            }
            for value, minutes in ((600, 5), (742, 2))
        ],
    )
    ages = CloudWatchAges(payments, now=lambda: now)

    readings = ages.read(payments.queues())

    reading = readings["relay-dev-payments-payment-requests"]
    assert reading.seconds == 742
    assert reading.describe(now) == "12 min (2 min ago)"
    assert readings["relay-dev-payments-sweeps"].describe(now) == "n/a (no datapoint in 30 min)"


def test_in_the_sandbox_the_age_comes_from_the_emulator_endpoint_or_is_na(
    payments: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    queues = payments.queues()
    source = next(q for q in queues if q.short == "payments-payment-requests")
    calls: list[str] = []

    def queue_ages(endpoint: str) -> dict[str, Any]:
        calls.append(endpoint)
        return {source.url: QueueAge(visible=3, in_flight=1, delayed=0, oldest_age_seconds=75.0)}

    fake = types.ModuleType("emulator.sqs_admin")
    fake.queue_ages = queue_ages  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "emulator.sqs_admin", fake)
    readings = SandboxAges("http://127.0.0.1:4566").read(queues)
    assert calls == ["http://127.0.0.1:4566"]
    assert readings[source.name].describe() == "75 s"
    assert readings["relay-dev-payments-sweeps"].describe().startswith("n/a")

    def not_found(endpoint: str) -> dict[str, Any]:
        raise urllib.error.HTTPError(f"{endpoint}/_relay/sqs/queues", 404, "Not Found", {}, None)  # type: ignore[arg-type]

    fake.queue_ages = not_found  # type: ignore[attr-defined]
    assert (
        SandboxAges("x").read(queues)[source.name].describe()
        == "n/a (the emulator has no /_relay/sqs/queues)"
    )

    monkeypatch.setitem(sys.modules, "emulator.sqs_admin", None)  # not in this checkout: ImportError
    assert SandboxAges("x").read(queues)[source.name].describe().startswith("n/a (this checkout has no")


def test_status_lists_the_alarms_in_alarm_and_each_mappings_state(deployed: Deployed) -> None:
    app = deployed.app
    cloudwatch = app.client("cloudwatch")
    alarm = next(a.name for a in app.alarms() if "paymentrequests" in a.name)
    cloudwatch.set_alarm_state(AlarmName=alarm, StateValue="ALARM", StateReason="Threshold Crossed")
    app.client("lambda").update_event_source_mapping(
        UUID=deployed.mappings["orders-analytics"], Enabled=False
    )

    snapshot = take_snapshot(app)
    text = render(snapshot)

    assert [a.name for a in snapshot.alarms_in_alarm] == [alarm]
    assert "alarms in ALARM (1)" in text and "payment-requests: messages are parked in the DLQ." in text
    lines = text.splitlines()
    assert any("<- payments-payment-requests: Enabled" in line for line in lines)
    assert any("<- orders-analytics: Disabled" in line for line in lines)


def test_in_the_sandbox_status_lists_every_alarm_with_its_state_and_runbook_and_mappings_are_declared(
    sandbox_app: App,
) -> None:
    dlq = "relay-dev-payments-payment-requests-dlq"
    (parked,) = [
        a.name
        for a in sandbox_app.alarms()
        if a.dimensions.get("QueueName") == dlq and a.metric_name == "ApproximateNumberOfMessagesVisible"
    ]
    sandbox_app.client("cloudwatch").set_alarm_state(
        AlarmName=parked, StateValue="ALARM", StateReason="Threshold Crossed: 1 out of the last 1 datapoints"
    )

    snapshot = take_snapshot(sandbox_app)
    text = render(snapshot)

    # Every alarm synthesized for the stacks the world holds, created as the template declares it.
    provisioned = ("relay-dev-payments-", "relay-dev-core-")
    declared = {a.name for a in sandbox_app.declared().alarms if a.name.startswith(provisioned)}
    assert len(declared) > 10 and {a.name for a in snapshot.alarms} == declared
    assert snapshot.alarms_declared_only == 0
    assert [a.name for a in snapshot.alarms_in_alarm] == [parked] == [snapshot.alarms[0].name]
    assert f"alarms in ALARM (1) of {len(declared)}; runbook: docs/ops.md#runbook-each-alarm-what-it" in text
    lines = text.splitlines()
    (alarm_line,) = [line for line in lines if parked.removeprefix("relay-dev-") in line]
    assert alarm_line.split()[0] == "ALARM"
    assert "`python -m ops dlq redrive payment-requests --reason '...' --dry-run`" in alarm_line
    (oldest_line,) = [line for line in lines if "AlarmspaymentrequestsOldestMessage" in line]
    assert oldest_line.split()[0] in ("OK", "INSUFFICIENT_DATA")
    assert oldest_line.endswith("runbook: python -m ops status; python -m ops doctor")
    (oldest,) = [a for a in snapshot.to_json()["alarms"] if "AlarmspaymentrequestsOldestMessage" in a["name"]]
    assert oldest["runbook"] == ["python -m ops status", "python -m ops doctor"]
    assert "PaymentWorkerFunction" in text and "(declared)" in text


def test_on_an_emulator_that_holds_no_alarms_status_says_they_are_only_declared(sandbox_app: App) -> None:
    cloudwatch = sandbox_app.client("cloudwatch")
    cloudwatch.delete_alarms(AlarmNames=[a.name for a in sandbox_app.alarms()])

    text = render(take_snapshot(sandbox_app))

    assert "alarms in ALARM: n/a" in text
    assert "note: alarms: this emulator holds none" in text
