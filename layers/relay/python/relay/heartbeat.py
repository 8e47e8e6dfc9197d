"""Visibility heartbeat: keep a long-running message invisible while it is being worked on.

If work outlives the visibility timeout, SQS hands the message to another consumer and the work
runs twice concurrently. The heartbeat extends the visibility (ChangeMessageVisibility) every
``interval`` seconds (default: half the visibility timeout, so one missed beat still leaves time)
from a background thread.

SQS rejects any extension past 12 hours of total in-flight time, counted from the receive. The
heartbeat caps every extension at what is left of those 12 hours (minus a safety margin) and stops
extending once nothing is left, rather than failing with an error at the limit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING

from relay.errors import TransientError

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

MAX_IN_FLIGHT_SECONDS = 43_200
# Covers clock skew and the gap between the SQS receive and the anchor the caller passes in.
SAFETY_MARGIN_SECONDS = 60


class HeartbeatFailed(TransientError):
    """Extending visibility failed: another consumer may have received the message meanwhile."""


class Heartbeat:
    """Context manager; ``with Heartbeat(...) as hb: long_work()``.

    ``first_received_at`` anchors the 12 h budget: the moment the current receipt handle was
    received (datetime, or epoch seconds). None means "now". Passing an earlier time is safe (the
    budget is only smaller). On exit the thread is stopped; if an extension failed, ``error`` holds
    it and -- when the body itself succeeded and ``raise_on_error`` is true -- HeartbeatFailed is
    raised, because the message may have been handed to another consumer (the idempotent commit
    makes the resulting retry harmless).
    """

    def __init__(
        self,
        sqs_client: SQSClient,
        queue_url: str,
        receipt_handle: str,
        *,
        visibility_timeout: int,
        first_received_at: datetime | float | None = None,
        interval: float | None = None,
        raise_on_error: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if visibility_timeout < 1:
            raise ValueError("visibility_timeout must be at least 1 second")
        self._client = sqs_client
        self._queue_url = queue_url
        self._receipt_handle = receipt_handle
        self._visibility_timeout = int(visibility_timeout)
        self._interval = interval if interval is not None else max(self._visibility_timeout / 2, 0.01)
        self._clock = clock
        if isinstance(first_received_at, datetime):
            anchor = first_received_at.timestamp()
        elif first_received_at is None:
            anchor = clock()
        else:
            anchor = float(first_received_at)
        self._deadline = anchor + MAX_IN_FLIGHT_SECONDS - SAFETY_MARGIN_SECONDS
        self._raise_on_error = raise_on_error
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.extensions = 0
        self.error: BaseException | None = None
        self.exhausted = False

    def __enter__(self) -> Heartbeat:
        self._thread = threading.Thread(target=self._run, name="relay-heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(self._interval, 5.0))
        if self.error is not None and exc is None and self._raise_on_error:
            raise HeartbeatFailed(
                f"visibility heartbeat failed after {self.extensions} extension(s): {self.error}; "
                "the message may have been received by another consumer, so it is retried."
            ) from self.error

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            remaining = int(self._deadline - self._clock())
            if remaining <= 0:
                # The 12 h in-flight limit is reached: SQS would reject further extensions.
                self.exhausted = True
                return
            try:
                self._client.change_message_visibility(
                    QueueUrl=self._queue_url,
                    ReceiptHandle=self._receipt_handle,
                    VisibilityTimeout=min(self._visibility_timeout, remaining),
                )
                self.extensions += 1
            except Exception as exc:  # surfaced on exit, never swallowed
                self.error = exc
                return
