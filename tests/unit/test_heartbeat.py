import threading
import time

import pytest

from relay.heartbeat import MAX_IN_FLIGHT_SECONDS, Heartbeat, HeartbeatFailed
from tests.unit.fakes import FakeSqs


def test_heartbeat_extends_visibility_while_work_runs_and_stops_on_exit() -> None:
    sqs = FakeSqs()
    with Heartbeat(sqs, "https://q", "rh-1", visibility_timeout=30, interval=0.01) as beat:
        assert sqs.visibility_called.wait(timeout=5)
    calls_at_exit = len(sqs.visibility)
    assert calls_at_exit >= 1 and beat.extensions == calls_at_exit
    assert sqs.visibility[0] == {"QueueUrl": "https://q", "ReceiptHandle": "rh-1", "VisibilityTimeout": 30}
    time.sleep(0.05)
    assert len(sqs.visibility) == calls_at_exit  # the thread is gone
    assert not any(t.name == "relay-heartbeat" and t.is_alive() for t in threading.enumerate())


def test_heartbeat_never_extends_past_twelve_hours_in_flight() -> None:
    sqs = FakeSqs()
    received = time.time() - MAX_IN_FLIGHT_SECONDS + 100  # 100 s left, 60 s of it safety margin
    with Heartbeat(sqs, "q", "rh", visibility_timeout=600, first_received_at=received, interval=0.01):
        assert sqs.visibility_called.wait(timeout=5)
    assert 0 < sqs.visibility[0]["VisibilityTimeout"] <= 40


def test_heartbeat_stops_extending_once_the_limit_is_reached() -> None:
    sqs = FakeSqs()
    received = time.time() - MAX_IN_FLIGHT_SECONDS
    with Heartbeat(sqs, "q", "rh", visibility_timeout=600, first_received_at=received, interval=0.01) as beat:
        deadline = time.time() + 5
        while not beat.exhausted and time.time() < deadline:
            time.sleep(0.01)
    assert beat.exhausted and sqs.visibility == []


def test_heartbeat_failure_is_raised_on_exit_when_the_work_succeeded() -> None:
    sqs = FakeSqs(fail_visibility=True)
    with pytest.raises(HeartbeatFailed, match="visibility heartbeat failed") as info:
        with Heartbeat(sqs, "q", "rh", visibility_timeout=30, interval=0.01):
            assert sqs.visibility_called.wait(timeout=5)
    assert isinstance(info.value.__cause__, ConnectionError)


def test_heartbeat_failure_does_not_mask_the_work_error() -> None:
    sqs = FakeSqs(fail_visibility=True)
    with pytest.raises(ValueError, match="work failed"):
        with Heartbeat(sqs, "q", "rh", visibility_timeout=30, interval=0.01) as beat:
            assert sqs.visibility_called.wait(timeout=5)
            raise ValueError("work failed")
    assert isinstance(beat.error, ConnectionError)
