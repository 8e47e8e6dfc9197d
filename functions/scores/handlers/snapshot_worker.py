"""Snapshot worker: snapshot queue (ScoreSnapshotDue) -> one score snapshot per agent for that hour,
never two and never a changed one. Domain: ``scores.snapshots.take_snapshot``."""

from __future__ import annotations

from relay.consumer import queue_handler
from scores.settings import SNAPSHOT_WORKER
from scores.snapshots import take_snapshot
from scores.wiring import wiring

handler = queue_handler(
    wiring.checked(SNAPSHOT_WORKER),
    lambda w, envelope, _ctx: take_snapshot(envelope, w.worker_store, now=w.clock()),
)
