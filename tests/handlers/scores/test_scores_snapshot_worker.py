"""The snapshot worker: every agent's score for the hour, written once -- never two, never changed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from relay.envelope import Envelope
from tests.builders import FakeContext, eventbridge_wrapped, sqs_event, sqs_record
from tests.handlers.scores.world import ScoresWorld, body_of, call_api, http_event

HOUR = "2026-11-29T08:00:00Z"


def job(hour: str = HOUR) -> Envelope:
    from scores.snapshots import snapshot_envelope

    return snapshot_envelope(hour, correlation_id="corr-1")


def run(body: Envelope | str, *, receive_count: int = 1) -> dict[str, Any]:
    from scores.handlers import snapshot_worker

    result: dict[str, Any] = snapshot_worker.handler(
        sqs_event([sqs_record(body, queue="snapshots", receive_count=receive_count)]), FakeContext()
    )
    return result


def seed_verifications(world: ScoresWorld) -> None:
    # agent-a: 3 verified + 1 mismatch before the end of 08:00-09:00; one more after it.
    world.add_verification("r-1", "agent-a", "VERIFIED", "2026-11-29T07:10:00.000Z")
    world.add_verification("r-2", "agent-a", "VERIFIED", "2026-11-29T08:00:00.000Z")
    world.add_verification("r-3", "agent-a", "VERIFIED", "2026-11-29T08:59:59.999Z")
    world.add_verification("r-4", "agent-a", "MISMATCH", "2026-11-29T08:30:00.000Z")
    world.add_verification("r-5", "agent-a", "MISMATCH", "2026-11-29T09:00:00.000Z")  # after the hour
    # agent-b: 1 unreachable.
    world.add_verification("r-6", "agent-b", "UNREACHABLE", "2026-11-29T06:00:00.000Z")
    # agent-c: only after the hour -> no snapshot for 08:00.
    world.add_verification("r-7", "agent-c", "VERIFIED", "2026-11-29T09:30:00.000Z")


def scores_by_agent(world: ScoresWorld, hour: str = HOUR) -> dict[str, tuple[str, int, int]]:
    return {
        s["agentId"]: (s["score"], s["verified"], s["total"])
        for s in world.snapshots()
        if s["snapshotHour"] == hour
    }


def test_each_agent_scores_verified_plus_one_over_total_plus_two_up_to_the_end_of_the_hour(
    world: ScoresWorld,
) -> None:
    seed_verifications(world)

    response = run(job())

    assert response == {"batchItemFailures": []}
    assert scores_by_agent(world) == {
        "agent-a": ("0.6667", 3, 4),  # (3 + 1) / (4 + 2)
        "agent-b": ("0.3333", 0, 1),  # (0 + 1) / (1 + 2)
    }
    a = world.snapshot("agent-a", HOUR)
    assert a is not None
    assert (a["mismatched"], a["unreachable"]) == (1, 0)
    assert a["countedBefore"] == "2026-11-29T09:00:00.000Z"


def test_the_snapshot_reads_the_time_from_its_wirings_clock(
    world: ScoresWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    import relay.wiring

    stopped = datetime(2026, 11, 29, 9, 5, 7, 250000, tzinfo=UTC)
    monkeypatch.setattr(relay.wiring, "utc_now", lambda: stopped)
    seed_verifications(world)

    assert run(job()) == {"batchItemFailures": []}

    a = world.snapshot("agent-a", HOUR)
    assert a is not None and a["computedAt"] == "2026-11-29T09:05:07.250Z"


def test_the_same_hour_twice_yields_one_unchanged_snapshot_per_agent(world: ScoresWorld) -> None:
    seed_verifications(world)
    run(job())
    first = world.snapshots()

    again = run(job(), receive_count=2)

    assert again == {"batchItemFailures": []}
    assert world.snapshots() == first  # computedAt included: not even rewritten


def test_a_second_run_that_would_compute_another_score_keeps_the_first_and_says_so(
    world: ScoresWorld, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_verifications(world)
    run(job())
    first = world.snapshots()
    # A verification committed late, with a checkedAt inside the hour.
    world.add_verification("r-late", "agent-b", "VERIFIED", "2026-11-29T08:59:00.000Z")

    # The same hour under another eventId (e.g. EventBridge -> SQS directly): no marker to stop it.
    replay = run(eventbridge_wrapped({"snapshotHour": "2026-11-29T08:00:00Z"}, event_id="eb-1"))

    assert replay == {"batchItemFailures": []}
    assert world.snapshots() == first
    assert "kept the first one" in caplog.text
    assert '"SnapshotChangeRefused":1' in capsys.readouterr().out


def test_a_job_interrupted_half_way_completes_on_redelivery_without_rewriting(
    world: ScoresWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scores.handlers import snapshot_worker
    from scores.store import ScoresStore
    from scores.wiring import wiring

    from relay.wiring import reset_all

    monkeypatch.setenv("RELAY_BACKOFF_BASE_SECONDS", "0")  # the retry copy is receivable at once
    reset_all()
    seed_verifications(world)
    store = wiring().worker_store
    real_put = ScoresStore.put_snapshot_once
    calls: list[str] = []

    def crash_on_second_agent(snapshot: Any) -> Any:
        calls.append(snapshot.agent_id)
        if len(calls) == 2:
            raise TimeoutError("Lambda ran out of time")
        return real_put(store, snapshot)

    monkeypatch.setattr(store, "put_snapshot_once", crash_on_second_agent)
    interrupted_job = job()
    interrupted = run(interrupted_job)
    # Transient: handled (Lambda deletes it) and re-sent as a delayed copy of the same job.
    assert interrupted == {"batchItemFailures": []}
    copy = world.retry_copy(attempt=1, body=interrupted_job.to_json())
    assert world.parked() == []
    assert set(scores_by_agent(world)) == {"agent-a"}
    written_first = world.snapshot("agent-a", HOUR)

    monkeypatch.setattr(store, "put_snapshot_once", lambda snapshot: real_put(store, snapshot))
    resumed = snapshot_worker.handler(world.lambda_event([copy]), FakeContext())

    assert resumed == {"batchItemFailures": []}
    assert set(scores_by_agent(world)) == {"agent-a", "agent-b"}
    assert world.snapshot("agent-a", HOUR) == written_first
    assert world.receive() == [] and world.parked() == []  # done: nothing retried again, nothing parked


def test_a_finished_job_delivered_again_does_not_rescan_the_verifications(world: ScoresWorld) -> None:
    seed_verifications(world)
    run(job())
    scans: list[str] = []
    from scores.wiring import wiring

    wiring().ddb.meta.events.register("before-call.dynamodb.Scan", lambda **_: scans.append("scan"))

    run(job(), receive_count=2)

    assert scans == []


def test_hours_are_independent_snapshots(world: ScoresWorld) -> None:
    seed_verifications(world)

    run(job("2026-11-29T08:00:00Z"))
    run(job("2026-11-29T09:00:00Z"))

    assert scores_by_agent(world, "2026-11-29T09:00:00Z") == {
        "agent-a": ("0.5714", 3, 5),  # r-5 (09:00) now counts: (3 + 1) / (5 + 2)
        "agent-b": ("0.3333", 0, 1),
        "agent-c": ("0.6667", 1, 1),
    }
    assert scores_by_agent(world, HOUR)["agent-a"] == ("0.6667", 3, 4)


def test_no_verifications_means_no_snapshots(world: ScoresWorld) -> None:
    assert run(job()) == {"batchItemFailures": []}
    assert world.snapshots() == []


def test_a_job_with_an_invalid_hour_is_parked(world: ScoresWorld) -> None:
    from tests.builders import envelope

    bad = envelope("ScoreSnapshotDue", identity=["bad"], ids={}, payload={"snapshotHour": "noon"})

    assert run(bad) == {"batchItemFailures": []}
    (parked,) = world.parked()
    assert parked["MessageAttributes"]["relay.errorClass"]["StringValue"] == "InvalidInput"


def test_post_then_worker_then_get_returns_the_hours_snapshot(world: ScoresWorld) -> None:
    from scores.handlers import snapshot_worker

    seed_verifications(world)
    assert call_api(http_event("POST", "/score-snapshots", body={"snapshotHour": HOUR}))["statusCode"] == 202
    assert call_api(http_event("POST", "/score-snapshots", body={"snapshotHour": HOUR}))["statusCode"] == 202

    messages = world.receive()
    assert len(messages) == 2  # an API Destination retry: two messages, one eventId
    assert snapshot_worker.handler(world.lambda_event(messages), FakeContext()) == {"batchItemFailures": []}

    body = body_of(call_api(http_event("GET", "/agents/agent-a/scores")))
    assert [(s["snapshotHour"], s["score"]) for s in body["snapshots"]] == [(HOUR, "0.6667")]
    assert len(world.snapshots()) == 2  # agent-a and agent-b, once each


def test_formula_of_the_scoring_module() -> None:
    from decimal import Decimal

    from scores.scoring import Tally, score, tally_by_agent

    assert score(Tally()) == Decimal("0.5000")
    assert score(Tally(verified=1)) == Decimal("0.6667")
    assert score(Tally(mismatched=1)) == Decimal("0.3333")
    assert score(Tally(verified=99, unreachable=1)) == Decimal("0.9804")
    tallies, skipped = tally_by_agent([("a", "VERIFIED"), ("a", "PENDING"), ("b", "MISMATCH")])
    assert tallies == {"a": Tally(verified=1), "b": Tally(mismatched=1)} and skipped == 1
