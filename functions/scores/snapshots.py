"""The hourly snapshot job: accepted by the API in milliseconds, done by the worker, exactly once.

Accepting (``POST /score-snapshots``): the API Destination waits at most 5 seconds and retries, so
the API only normalises ``snapshotHour`` and enqueues ``ScoreSnapshotDue {snapshotHour}`` (one
SendMessage) whose eventId is ``build_event_id("ScoreSnapshotDue", snapshotHour)``: every retry,
replay or second schedule delivery of an hour carries the same eventId.

Doing (snapshot worker): tally every agent's verification records checked before the end of the
hour (``scores.scoring``) and write one snapshot item per agent with ``attribute_not_exists``.

Why per-agent conditional puts and not one ``commit_once`` for the whole job: a transaction holds at
most 100 items, so one transaction caps the job at 99 agents; and a job that stops half-way (timeout,
throttling) must be resumable -- the redelivery skips the agents already written (their condition
fails) and writes the rest. The conditional put is the guarantee: the same hour processed twice
yields one snapshot per agent, and a second run that would compute something else (a verification
committed late with an earlier ``checkedAt``) keeps the first snapshot and says so in a warning log
and the ``SnapshotChangeRefused`` metric. The kernel marker (``commit_once`` with no business writes)
is written after the last agent, as an early exit: a duplicate of a finished job does not rescan.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from relay.envelope import Envelope, new_envelope
from relay.errors import InvalidInput
from relay.idempotency import commit_once
from relay.observability import logger, record_metric
from scores.hours import HOUR, hour_start, iso_millis, normalise_hour
from scores.scoring import score, tally_by_agent
from scores.store import ScoresStore, Snapshot

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

SCORE_SNAPSHOT_DUE = "ScoreSnapshotDue"


def snapshot_envelope(snapshot_hour: str, *, correlation_id: str) -> Envelope:
    """The job for ``snapshot_hour`` (canonical text); its eventId depends on the hour only."""
    return new_envelope(
        SCORE_SNAPSHOT_DUE,
        identity=[snapshot_hour],
        ids={"snapshotHour": snapshot_hour},
        payload={"snapshotHour": snapshot_hour},
        correlation_id=correlation_id,
    )


def enqueue_snapshot(
    snapshot_hour: str, *, sqs_client: SQSClient, queue_url: str, correlation_id: str
) -> Envelope:
    envelope = snapshot_envelope(snapshot_hour, correlation_id=correlation_id)
    params: dict[str, Any] = {
        "QueueUrl": queue_url,
        "MessageBody": envelope.to_json(),
        "MessageAttributes": {"eventType": {"DataType": "String", "StringValue": envelope.event_type}},
    }
    if queue_url.endswith(".fifo"):
        # On a FIFO queue SQS itself drops a repeat of the hour within its 5-minute dedup window.
        params["MessageGroupId"] = SCORE_SNAPSHOT_DUE
        params["MessageDeduplicationId"] = envelope.event_id
    sqs_client.send_message(**params)
    return envelope


@dataclass(frozen=True)
class SnapshotRun:
    snapshot_hour: str
    written: int = 0
    unchanged: int = 0
    refused: int = 0
    skipped_job: bool = False


def snapshot_hour_of(envelope: Envelope) -> str:
    if envelope.event_type != SCORE_SNAPSHOT_DUE:
        raise InvalidInput(
            f"event {envelope.event_id} is a {envelope.event_type}, not a {SCORE_SNAPSHOT_DUE}. Parked: "
            "only the scores API should send to the snapshot queue."
        )
    raw = (envelope.payload or {}).get("snapshotHour")
    try:
        return normalise_hour(raw) if isinstance(raw, str) else normalise_hour("")
    except ValueError as exc:
        raise InvalidInput(
            f"{SCORE_SNAPSHOT_DUE} {envelope.event_id}: snapshotHour {exc}. "
            "Parked: fix the sender, then redrive."
        ) from None


def take_snapshot(envelope: Envelope, store: ScoresStore, *, now: datetime) -> SnapshotRun:
    hour = snapshot_hour_of(envelope)
    log = logger()
    if store.already_processed(envelope):
        log.info("snapshot job already done; acknowledged", extra={"snapshot_hour": hour})
        record_metric("Duplicate", event_type=envelope.event_type)
        return SnapshotRun(hour, skipped_job=True)

    cutoff = iso_millis(hour_start(hour) + HOUR)
    tallies, skipped = tally_by_agent(store.verification_outcomes(checked_before=cutoff))
    computed_at = iso_millis(now)
    written = unchanged = refused = 0
    for agent_id in sorted(tallies):
        tally = tallies[agent_id]
        snapshot = Snapshot(
            agent_id=agent_id,
            snapshot_hour=hour,
            score=str(score(tally)),
            verified=tally.verified,
            mismatched=tally.mismatched,
            unreachable=tally.unreachable,
            total=tally.total,
            counted_before=cutoff,
            computed_at=computed_at,
            event_id=envelope.event_id,
        )
        stored = store.put_snapshot_once(snapshot)
        if stored is None:
            written += 1
        elif stored.same_result(snapshot):
            unchanged += 1
        else:
            refused += 1
            record_metric("SnapshotChangeRefused", event_type=envelope.event_type)
            log.warning(
                "snapshot for this hour already exists with another result; kept the first one",
                extra={
                    "snapshot_hour": hour,
                    "agent_id": agent_id,
                    "stored": {"score": stored.score, "verified": stored.verified, "total": stored.total},
                    "computed": {
                        "score": snapshot.score,
                        "verified": snapshot.verified,
                        "total": snapshot.total,
                    },
                },
            )
    # Marker last: written only when every agent has its snapshot, so a crash before it reruns the job.
    if store.idempotency_table is None:  # pragma: no cover - the wiring always sets it
        raise RuntimeError("ScoresStore was built without the idempotency table")
    commit_once(envelope, [], table_name=store.idempotency_table, ddb_client=store.ddb)
    record_metric("SnapshotsWritten", value=written, event_type=envelope.event_type)
    log.info(
        "snapshot job done",
        extra={
            "snapshot_hour": hour,
            "agents": len(tallies),
            "written": written,
            "unchanged": unchanged,
            "refused": refused,
            "skipped_records": skipped,
        },
    )
    return SnapshotRun(hour, written=written, unchanged=unchanged, refused=refused)
