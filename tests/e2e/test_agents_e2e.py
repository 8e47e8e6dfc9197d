"""Agents end to end through the local sandbox: report verification by read-back, and the hourly
score snapshot through Scheduler → event bus → rule → API destination → scores API."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests

from emulator.eventbridge import Delivery
from emulator.server import client
from local.demo import publish_report
from local.sandbox import Sandbox
from tests.e2e import api

pytestmark = pytest.mark.e2e

# The hourly snapshot schedule (the payments sweeper's is another one).
SNAPSHOT_SCHEDULE = "scores-hourly-snapshot"


def snapshot_rule(sb: Sandbox) -> Any:
    """The hourly snapshot's rule (the bus has the orders rules too)."""
    (rule,) = [r for r in sb.topology.rules if r.name.endswith(SNAPSHOT_SCHEDULE)]
    return rule


def wait_for(what: str, check: Callable[[], Any], timeout: float = 30.0, every: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not true after {timeout:g} s")
        time.sleep(every)


def queue_url(sb: Sandbox, suffix: str) -> str:
    return next(url for name, url in sb.topology.queues.items() if name.endswith(suffix))


def table(sb: Sandbox, suffix: str) -> str:
    return next(name for name in sb.topology.tables if name.endswith(suffix))


def verification(sb: Sandbox, report_id: str) -> dict[str, Any] | None:
    item = client("dynamodb", sb.endpoint).get_item(
        TableName=table(sb, "reports-verifications"),
        Key={"pk": {"S": f"REPORT#{report_id}"}, "sk": {"S": "VERIFICATION"}},
        ConsistentRead=True,
    )
    return item.get("Item")


@dataclass
class Reports:
    agents: dict[str, list[str]]  # agent -> its report ids
    late: set[str]
    tampered: str


@pytest.fixture(scope="module")
def reports(sandbox: Sandbox) -> Reports:
    """Five reports of two agents: two visible only from the third read, one tampered in the API."""
    run = uuid.uuid4().hex[:6]
    agents = {
        f"agent-a-{run}": [f"r-{run}-1", f"r-{run}-2", f"r-{run}-3"],
        f"agent-b-{run}": [f"r-{run}-4", f"r-{run}-5"],
    }
    late = {f"r-{run}-2", f"r-{run}-4"}
    tampered = f"r-{run}-3"
    sandbox.reports.set_knobs(tamper_ids=frozenset({*sandbox.reports.knobs.tamper_ids, tampered}))
    for agent, report_ids in agents.items():
        for report_id in report_ids:
            publish_report(
                sandbox,
                report_id,
                agent,
                f"report {report_id} of {agent}".encode(),
                correlation_id=f"e2e-{report_id}",
                invisible_reads=2 if report_id in late else 0,
            )
    all_ids = [r for ids in agents.values() for r in ids]
    wait_for("every report has a verification record", lambda: all(verification(sandbox, r) for r in all_ids))
    return Reports(agents, late, tampered)


# reports: verification by read-back ---------------------------------------------------------------


def test_reports_read_back_verified_except_the_tampered_one_which_is_a_mismatch(
    sandbox: Sandbox, reports: Reports
) -> None:
    for report_ids in reports.agents.values():
        for report_id in report_ids:
            record = verification(sandbox, report_id)
            assert record is not None
            expected = "MISMATCH" if report_id == reports.tampered else "VERIFIED"
            assert record["status"]["S"] == expected, report_id
    tampered = verification(sandbox, reports.tampered)
    assert tampered is not None
    assert tampered["actualSha256"]["S"] != tampered["expectedSha256"]["S"]


def test_late_reports_are_read_again_until_visible_then_verified(sandbox: Sandbox, reports: Reports) -> None:
    reads = sandbox.reports.reads()
    for report_id in reports.late:
        # Two 404s (not visible yet → transient, backed off), then the read that verified it.
        assert reads[report_id] >= 3, reads
        record = verification(sandbox, report_id)
        assert record is not None and record["status"]["S"] == "VERIFIED"
        assert int(record["attempts"]["N"]) >= 3


def test_each_report_is_notified_to_the_webhook_exactly_once(sandbox: Sandbox, reports: Reports) -> None:
    keys = [f"{r}:report-ready" for ids in reports.agents.values() for r in ids]
    wait_for("every report notified", lambda: all(k in sandbox.webhook.deliveries_by_key() for k in keys))
    time.sleep(1.5)  # a redelivery, if any, would land within a batching window
    counts = sandbox.webhook.deliveries_by_key()
    assert {k: counts[k] for k in keys} == dict.fromkeys(keys, 1)


# scores: the snapshot endpoint and its authorizer -------------------------------------------------


def api_key(sb: Sandbox) -> str:
    arn = next(arn for logical, arn in sb.topology.secrets.items() if "SnapshotApiKey" in logical)
    return str(client("secretsmanager", sb.endpoint).get_secret_value(SecretId=arn)["SecretString"])


def test_generated_api_key_secret_is_random_and_the_connection_sends_it(sandbox: Sandbox) -> None:
    key = api_key(sandbox)
    assert len(key) == 48 and key.isalnum()
    assert sandbox.eventbridge is not None
    (destination,) = sandbox.topology.api_destinations.values()
    assert sandbox.eventbridge.api_key_header(destination) == ("x-api-key", key)


def test_snapshot_endpoint_answers_401_without_key_403_with_a_wrong_one_and_202_with_the_secret(
    sandbox: Sandbox,
) -> None:
    # Unsigned on purpose: the route's Lambda authorizer reads the API key, not a SigV4 signature.
    url = f"{sandbox.api_url}/score-snapshots"
    body = {"snapshotHour": "2020-01-01T00:00:00Z"}
    missing = requests.post(url, json=body, timeout=10)
    assert (missing.status_code, missing.json()) == (401, {"message": "Unauthorized"})
    wrong = requests.post(url, json=body, headers={"x-api-key": "not-the-key"}, timeout=10)
    assert (wrong.status_code, wrong.json()) == (403, {"message": "Forbidden"})
    accepted = requests.post(url, json=body, headers={"x-api-key": api_key(sandbox)}, timeout=10)
    assert accepted.status_code == 202


# scores: Scheduler → bus → rule → API destination -------------------------------------------------


def scores_of(sb: Sandbox, agent: str, hour: str) -> list[dict[str, Any]]:
    response = api.get(sb, f"/agents/{agent}/scores", params={"from": hour, "to": hour}, timeout=10)
    assert response.status_code == 200, response.text
    return list(response.json()["snapshots"])


def test_firing_the_schedule_twice_gives_one_unchanged_snapshot_per_agent_for_the_hour(
    sandbox: Sandbox, reports: Reports
) -> None:
    (first,) = sandbox.fire_schedule(sandbox.schedule_named(SNAPSHOT_SCHEDULE))
    hour = first.scheduled_time
    assert hour.endswith(":00:00Z")
    (delivery,) = first.wait()
    assert delivery.delivered and [a.status for a in delivery.attempts] == [202]
    snapshots = {
        agent: wait_for(
            f"snapshot of {agent} for {hour}", lambda a=agent: scores_of(sandbox, a, hour), timeout=30
        )
        for agent in reports.agents
    }
    for agent, report_ids in reports.agents.items():
        (snapshot,) = snapshots[agent]
        assert snapshot["snapshotHour"] == hour
        assert snapshot["total"] == len(report_ids)
        assert snapshot["mismatched"] == (1 if reports.tampered in report_ids else 0)

    (second,) = sandbox.fire_schedule(sandbox.schedule_named(SNAPSHOT_SCHEDULE), scheduled_time=hour)
    assert [d.delivered for d in second.wait()] == [True]
    time.sleep(3)  # the second job's batching window and invocation
    for agent in reports.agents:
        assert scores_of(sandbox, agent, hour) == snapshots[agent]


@pytest.fixture
def connection_auth(sandbox: Sandbox) -> Iterator[Callable[[str, str], None]]:
    """Change the Connection's API-key header/value in the emulator; restored afterwards."""
    assert sandbox.eventbridge is not None
    (destination,) = sandbox.topology.api_destinations.values()
    connection = sandbox.topology.connections[destination.connection_arn]
    original = sandbox.eventbridge.api_key_header(destination)
    events = client("events", sandbox.endpoint)

    def set_auth(name: str, value: str) -> None:
        events.update_connection(
            Name=connection.name,
            AuthorizationType="API_KEY",
            AuthParameters={"ApiKeyAuthParameters": {"ApiKeyName": name, "ApiKeyValue": value}},
        )

    yield set_auth
    set_auth(*original)


def dead_lettered(sb: Sandbox, event_id: str) -> dict[str, Any]:
    sqs = client("sqs", sb.endpoint)
    dlq = queue_url(sb, "hourly-snapshot-target-dlq")

    def find() -> dict[str, Any] | None:
        messages = sqs.receive_message(
            QueueUrl=dlq, MessageAttributeNames=["All"], MaxNumberOfMessages=10, WaitTimeSeconds=1
        ).get("Messages", [])
        for message in messages:
            if json.loads(message["Body"])["id"] == event_id:
                return dict(message)
        return None

    return dict(wait_for(f"event {event_id} in the rule's DLQ", find, timeout=10, every=0))


def assert_dlq_attributes(message: dict[str, Any], sb: Sandbox, delivery: Delivery, code: str) -> None:
    attributes = {k: v["StringValue"] for k, v in message["MessageAttributes"].items()}
    rule = snapshot_rule(sb)
    assert attributes["RULE_ARN"] == rule.arn
    assert attributes["TARGET_ARN"] == delivery.target_arn
    assert attributes["ERROR_CODE"] == code
    assert attributes["ERROR_MESSAGE"]


def test_wrong_api_key_is_403_which_eventbridge_does_not_retry_so_the_event_is_dead_lettered(
    sandbox: Sandbox, connection_auth: Callable[[str, str], None]
) -> None:
    connection_auth("x-api-key", "a-wrong-key")
    (firing,) = sandbox.fire_schedule(sandbox.schedule_named(SNAPSHOT_SCHEDULE), "2020-01-01T05:00:00Z")
    (delivery,) = firing.wait()
    assert [a.status for a in delivery.attempts] == [403]
    assert not delivery.delivered and delivery.dead_lettered
    message = dead_lettered(sandbox, str(firing.event_id))
    assert json.loads(message["Body"])["detail"] == {"snapshotHour": "2020-01-01T05:00:00Z"}
    assert_dlq_attributes(message, sandbox, delivery, "HTTP_403")


def test_missing_api_key_is_401_retried_per_the_retry_policy_then_dead_lettered(
    sandbox: Sandbox, connection_auth: Callable[[str, str], None]
) -> None:
    # The connection sends its key under another header: the authorizer's identity source is missing.
    connection_auth("x-api-token", api_key(sandbox))
    (firing,) = sandbox.fire_schedule(sandbox.schedule_named(SNAPSHOT_SCHEDULE), "2020-01-01T06:00:00Z")
    (delivery,) = firing.wait()
    rule = snapshot_rule(sandbox)
    retries = rule.targets[0].retry.maximum_retry_attempts
    assert [a.status for a in delivery.attempts] == [401] * (1 + retries)
    assert delivery.dead_lettered
    message = dead_lettered(sandbox, str(firing.event_id))
    assert_dlq_attributes(message, sandbox, delivery, "HTTP_401")
    assert message["MessageAttributes"]["RETRY_ATTEMPTS"]["StringValue"] == str(retries)
