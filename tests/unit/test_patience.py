"""The sandbox's waits (``local.lifecycle.Patience``) last while the work moves, on any clock."""

from __future__ import annotations

import pytest

from local import lifecycle


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(lifecycle.time, "monotonic", fake)
    return fake


def test_a_wait_goes_on_past_the_stall_while_its_progress_changes(clock: Clock) -> None:
    waiting = lifecycle.Patience(stall=10, cap=100)
    for done in range(9):
        assert waiting.more(done)
        clock.now += 9  # 81 s in all: 8 times longer than the stall, and never stalled
    assert waiting.more(9)


def test_a_wait_gives_up_once_its_progress_stopped_for_the_stall(clock: Clock) -> None:
    waiting = lifecycle.Patience(stall=10, cap=100)
    assert waiting.more(3)
    clock.now += 9.9
    assert waiting.more(3)
    clock.now += 0.2
    assert not waiting.more(3)


def test_a_wait_gives_up_at_its_cap_even_while_moving(clock: Clock) -> None:
    waiting = lifecycle.Patience(stall=10, cap=30)
    for done in range(3):
        assert waiting.more(done)
        clock.now += 9
    assert waiting.more(3)  # 27 s
    clock.now += 3
    assert not waiting.more(4)  # 30 s: the cap
