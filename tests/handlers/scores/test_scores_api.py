"""POST /score-snapshots (202 fast, one job per call, deterministic eventId) and GET /agents/{id}/scores."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from relay.envelope import build_event_id
from tests.handlers.hostile_http import assert_refused, hostile_bodies, readable_encodings, with_body
from tests.handlers.scores.world import SCORES_TABLE, ScoresWorld, body_of, call_api, http_event

OPENAPI = Path(__file__).resolve().parents[3] / "functions" / "scores" / "openapi.json"
HOUR = "2026-11-29T08:00:00Z"


def post_snapshot(body: Any) -> dict[str, Any]:
    return call_api(http_event("POST", "/score-snapshots", body=body))


def get_scores(agent_id: str, **query: str) -> dict[str, Any]:
    return call_api(http_event("GET", f"/agents/{agent_id}/scores", query=query))


# POST /score-snapshots ----------------------------------------------------------------------------


def test_post_answers_202_and_enqueues_one_job_with_the_deterministic_event_id(world: ScoresWorld) -> None:
    response = post_snapshot({"snapshotHour": HOUR})

    assert response["statusCode"] == 202
    assert body_of(response) == {"snapshotHour": HOUR, "status": "ACCEPTED"}
    (message,) = world.receive()
    job = json.loads(message["Body"])
    assert job["eventType"] == "ScoreSnapshotDue"
    assert job["eventId"] == build_event_id("ScoreSnapshotDue", HOUR)
    assert job["payload"] == {"snapshotHour": HOUR}
    assert message["MessageAttributes"]["eventType"]["StringValue"] == "ScoreSnapshotDue"


def test_post_touches_nothing_but_the_queue(world: ScoresWorld) -> None:
    from scores.wiring import wiring

    post_snapshot({"snapshotHour": HOUR})

    # The fast path: one SendMessage; no DynamoDB client is even built.
    assert "ddb" not in vars(wiring())
    assert len(world.receive()) == 1


@pytest.mark.parametrize(
    "written",
    [
        "2026-11-29T08:00:00Z",  # EventBridge Scheduler's <aws.scheduler.scheduled-time>
        "2026-11-29T08:59:59.999Z",
        "2026-11-29T09:37:12+01:00",
        "2026-11-29T03:15:00-05:00",
        "2026-11-29 08:30:00+00:00",
        "2026-11-29T08:00:00z",
    ],
)
def test_any_iso_8601_time_is_normalised_to_its_utc_hour_and_the_same_job(
    world: ScoresWorld, written: str
) -> None:
    response = post_snapshot({"snapshotHour": written})

    assert response["statusCode"] == 202
    assert body_of(response)["snapshotHour"] == HOUR
    (message,) = world.receive()
    assert json.loads(message["Body"])["eventId"] == build_event_id("ScoreSnapshotDue", HOUR)


def test_each_retry_of_an_hour_enqueues_the_same_event_id(world: ScoresWorld) -> None:
    for _ in range(3):
        post_snapshot({"snapshotHour": HOUR})

    ids = {json.loads(m["Body"])["eventId"] for m in world.receive()}
    assert ids == {build_event_id("ScoreSnapshotDue", HOUR)}


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({}, "Field required"),
        ({"snapshotHour": "yesterday"}, "ISO-8601"),
        ({"snapshotHour": "2026-11-29T10:00:00"}, "time zone"),
        ({"snapshotHour": "2026-11-29"}, "not a date"),
        ({"snapshotHour": 1764410400}, "string"),
        ({"snapshotHour": "1969-12-31T23:00:00Z"}, "1970 or later"),
        ({"snapshotHour": " 2026-11-29T10:00:00Z"}, "1970 or later"),  # the document's pattern, as sent
    ],
)
def test_invalid_body_is_400_with_field_errors_and_nothing_enqueued(
    world: ScoresWorld, body: dict[str, Any], reason: str
) -> None:
    response = post_snapshot(body)

    assert response["statusCode"] == 400
    error = body_of(response)
    assert error["error"] == "ValidationError"
    assert [f["field"] for f in error["fields"]] == ["snapshotHour"]
    assert reason.lower() in error["fields"][0]["message"].lower()
    assert world.receive() == []


@pytest.mark.parametrize(
    "hour", ["2999-01-01T00:00:00Z", "9999-12-31T23:30:00-05:00"], ids=["far ahead", "beyond 9999 in UTC"]
)
def test_an_hour_ahead_of_now_is_409_too_early_and_nothing_enqueued(world: ScoresWorld, hour: str) -> None:
    response = post_snapshot({"snapshotHour": hour})

    assert response["statusCode"] == 409
    assert body_of(response)["error"] == "SnapshotHourAhead"
    assert "ahead of now" in body_of(response)["message"]
    assert world.receive() == []


def test_an_hour_in_1970_that_is_1969_in_utc_is_accepted(world: ScoresWorld) -> None:
    response = post_snapshot({"snapshotHour": "1970-01-01T00:30:00+01:00"})

    assert response["statusCode"] == 202
    assert body_of(response)["snapshotHour"] == "1969-12-31T23:00:00Z"


@pytest.mark.parametrize("hostile", hostile_bodies({"snapshotHour": HOUR}, max_body_bytes=16 * 1024))
def test_a_body_the_api_cannot_read_is_4xx_never_5xx_and_nothing_enqueued(
    world: ScoresWorld, hostile: tuple[dict[str, object], dict[str, str], int, str]
) -> None:
    fields, headers, status, error = hostile
    response = call_api(with_body(http_event("POST", "/score-snapshots"), fields, headers))

    assert_refused(response, status, error)
    assert world.receive() == []


@pytest.mark.parametrize("encoding", readable_encodings({"snapshotHour": HOUR}))
def test_a_valid_body_is_accepted_however_api_gateway_encodes_it(
    world: ScoresWorld, encoding: tuple[dict[str, object], dict[str, str | None]]
) -> None:
    fields, headers = encoding
    response = call_api(with_body(http_event("POST", "/score-snapshots"), fields, headers))

    assert response["statusCode"] == 202, response


def test_body_that_is_not_json_is_400(world: ScoresWorld) -> None:
    response = post_snapshot("{not json")

    assert response["statusCode"] == 400
    assert world.receive() == []


def test_the_next_hour_is_accepted_for_clock_skew(world: ScoresWorld) -> None:
    next_hour = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:00:00Z")

    assert post_snapshot({"snapshotHour": next_hour})["statusCode"] == 202


def test_queue_unavailable_is_503_so_the_api_destination_retries(
    world: ScoresWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    from relay.wiring import reset_all

    monkeypatch.setenv("SNAPSHOT_QUEUE_URL", world.queue_url.replace("snapshots", "no-such-queue"))
    reset_all()

    response = post_snapshot({"snapshotHour": HOUR})

    assert response["statusCode"] == 503
    assert body_of(response)["error"] == "ServiceUnavailable"


# GET /agents/{agentId}/scores ----------------------------------------------------------------------


def seed(world: ScoresWorld, agent_id: str, hours: list[str]) -> None:
    from relay.ddb import serialize_item

    for index, hour in enumerate(hours):
        world.ddb.put_item(
            TableName=SCORES_TABLE,
            Item=serialize_item(
                {
                    "pk": f"AGENT#{agent_id}",
                    "sk": f"HOUR#{hour}",
                    "kind": "score-snapshot",
                    "agentId": agent_id,
                    "snapshotHour": hour,
                    "score": f"0.{5000 + index}",
                    "verified": index,
                    "mismatched": 0,
                    "unreachable": 0,
                    "total": index,
                    "countedBefore": "x",
                    "computedAt": "2026-11-29T10:00:00.000Z",
                    "eventId": "e",
                }
            ),
        )


HOURS = [f"2026-11-29T{h:02d}:00:00Z" for h in (6, 7, 8, 9, 10)]


def test_get_returns_the_agents_snapshots_in_the_range_oldest_first(world: ScoresWorld) -> None:
    seed(world, "agent-a", HOURS)
    seed(world, "agent-b", HOURS)

    response = get_scores("agent-a", **{"from": "2026-11-29T07:30:00Z", "to": "2026-11-29T09:00:00Z"})

    assert response["statusCode"] == 200
    body = body_of(response)
    assert body["agentId"] == "agent-a"
    assert [s["snapshotHour"] for s in body["snapshots"]] == HOURS[1:4]
    assert body["snapshots"][0] == {
        "snapshotHour": HOURS[1],
        "score": "0.5001",
        "verified": 1,
        "mismatched": 0,
        "unreachable": 0,
        "total": 1,
        "countedBefore": "x",
        "computedAt": "2026-11-29T10:00:00.000Z",
    }
    assert "nextFrom" not in body


def test_get_without_a_range_returns_everything_and_open_ends_work(world: ScoresWorld) -> None:
    seed(world, "agent-a", HOURS)

    everything = body_of(get_scores("agent-a"))["snapshots"]
    since = body_of(get_scores("agent-a", **{"from": HOURS[3]}))["snapshots"]
    until = body_of(get_scores("agent-a", to=HOURS[1]))["snapshots"]

    assert [s["snapshotHour"] for s in everything] == HOURS
    assert [s["snapshotHour"] for s in since] == HOURS[3:]
    assert [s["snapshotHour"] for s in until] == HOURS[:2]


def test_get_pages_with_limit_and_next_from(world: ScoresWorld) -> None:
    seed(world, "agent-a", HOURS)

    first = body_of(get_scores("agent-a", limit="2"))
    second = body_of(get_scores("agent-a", limit="2", **{"from": first["nextFrom"]}))

    assert [s["snapshotHour"] for s in first["snapshots"]] == HOURS[:2]
    assert first["nextFrom"] == HOURS[2]
    assert [s["snapshotHour"] for s in second["snapshots"]] == HOURS[2:4]


def test_get_for_an_agent_without_snapshots_is_an_empty_list(world: ScoresWorld) -> None:
    assert body_of(get_scores("agent-new")) == {"agentId": "agent-new", "snapshots": []}


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"from": "soon"}, "from"),
        ({"to": "2026-11-29T10:00:00"}, "to"),
        ({"limit": "0"}, "limit"),
    ],
)
def test_get_with_an_invalid_range_is_400(world: ScoresWorld, query: dict[str, str], field: str) -> None:
    response = get_scores("agent-a", **query)

    assert response["statusCode"] == 400
    assert [f["field"] for f in body_of(response)["fields"]] == [field]


def test_a_range_from_after_to_is_empty_not_invalid(world: ScoresWorld) -> None:
    seed(world, "agent-a", HOURS)

    response = get_scores("agent-a", **{"from": HOURS[3], "to": HOURS[1]})

    assert response["statusCode"] == 200
    assert body_of(response)["snapshots"] == []


def test_range_ends_beyond_the_representable_years_are_open_ends(world: ScoresWorld) -> None:
    seed(world, "agent-a", HOURS)

    # 0001-01-01T00:00+01:00 is in the year 0 in UTC; 9999-12-31T23:30-05:00 in the year 10000.
    response = get_scores(
        "agent-a", **{"from": "0001-01-01T00:00:00+01:00", "to": "9999-12-31T23:30:00-05:00"}
    )

    assert response["statusCode"] == 200
    assert [s["snapshotHour"] for s in body_of(response)["snapshots"]] == HOURS


def test_checked_in_openapi_document_is_current() -> None:
    from scores.handlers.api import openapi_document

    assert OPENAPI.exists(), "functions/scores/openapi.json is missing; generate it (see scores.handlers.api)"
    assert OPENAPI.read_text() == openapi_document(), (
        "functions/scores/openapi.json is stale: regenerate it with "
        "PYTHONPATH=layers/relay/python:functions python -m scores.handlers.api "
        "> functions/scores/openapi.json"
    )
