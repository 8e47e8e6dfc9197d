"""The chaos run's backpressure gives up on a backlog that does not drain (local/chaos.py): the senders
stop, and the run fails with the reason, instead of holding them forever."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Iterator

import pytest

from local import chaos
from local.chaos import Chaos


def _watching(backlogs: Iterator[int]) -> Chaos:
    run = Chaos.__new__(Chaos)
    run.stop, run.out, run.backlog, run.stalled = threading.Event(), io.StringIO(), 0, ""
    last = [0]

    def queued() -> tuple[int, int]:
        last[0] = next(backlogs, last[0])
        return last[0], 0

    run.queued = queued  # type: ignore[method-assign]
    return run


def _watch(run: Chaos, seconds: float) -> None:
    thread = threading.Thread(target=run.watch_backlog, daemon=True)
    thread.start()
    time.sleep(seconds)
    run.stop.set()
    thread.join()


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chaos, "BACKLOG_READ_EVERY", 0.01)
    monkeypatch.setattr(chaos, "BACKLOG_STALL_SECONDS", 0.3)


def test_a_backlog_stuck_over_the_limit_stops_the_senders_with_the_reason() -> None:
    run = _watching(iter([chaos.BACKLOG_LIMIT + 50]))
    _watch(run, 0.6)
    assert "450 messages (over 400)" in run.stalled and "does not drain" in run.stalled
    run.paced()  # returns at once: no sender is held once stalled
    assert "senders stopped" in run.out.getvalue()


def test_a_backlog_that_keeps_shrinking_or_stays_under_the_limit_holds_nothing_up() -> None:
    shrinking = iter(range(chaos.BACKLOG_LIMIT + 1000, chaos.BACKLOG_LIMIT - 1, -1))
    run = _watching(shrinking)
    _watch(run, 0.6)
    assert run.stalled == ""
    under = _watching(iter([chaos.BACKLOG_LIMIT]))
    _watch(under, 0.6)
    assert under.stalled == ""
