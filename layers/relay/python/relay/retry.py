"""Retry budgets measured in time: the delay chain of a transient failure.

Retrying in place (ChangeMessageVisibility, then reporting the record failed) spends one of the
queue's ``maxReceiveCount`` receives per attempt, so a downstream outage of a few minutes moves
healthy messages to the DLQ. With a retry budget (``RELAY_RETRY_BUDGET_SECONDS``) the consumer instead
re-sends the failed message to its own queue with ``DelaySeconds`` and reports the original handled:
a chain of delayed copies, each carrying

* ``relay.attempt`` (Number) -- which retry this copy is (1 = the first);
* ``relay.firstFailureAt`` (Number, epoch seconds) -- when the chain's first transient failure happened;
* ``relay.lastError`` (String) -- the failure that scheduled this copy (first 256 characters).

Each copy is a new SQS message (its receive count starts at 1 again), so the budget, not
``maxReceiveCount``, bounds how long transient failures are retried; ``maxReceiveCount`` still counts
the receives of one copy, i.e. crashes and timeouts of the function itself. A failure at or after
``firstFailureAt + budget`` raises ``RetryBudgetSpent``, a ``PermanentError``: the message is parked in
the DLQ with the reason. The last retry may therefore run up to one delay (at most 15 minutes) after
the budget: a retry is scheduled while the budget lasts, not cut short to end exactly on it.

A message without ``relay.attempt`` starts a new chain, so a message redriven from the DLQ gets a full
budget again (parking keeps ``relay.firstFailureAt`` as the time of its first failure, but not
``relay.attempt``). A ``relay.firstFailureAt`` in the future counts as now: a producer cannot make a
chain endless.

The delay is ``relay.backoff.backoff_delay`` with the attempt for the receive count, never more than
``min(cap, 900)`` (SQS's DelaySeconds maximum), jitter included: the exponential part stops at
``limit / (1 + JITTER_FRACTION)`` so that messages which reached the cap still come back spread out. A
dependency's ``retry_after`` hint is honoured up to 900 s.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from relay.backoff import JITTER_FRACTION, backoff_delay
from relay.errors import PermanentError

ATTEMPT: Final = "relay.attempt"
FIRST_FAILURE_AT: Final = "relay.firstFailureAt"
LAST_ERROR: Final = "relay.lastError"
RETRY_ATTRIBUTES: Final = (ATTEMPT, FIRST_FAILURE_AT, LAST_ERROR)
# The kernel's own message attributes (these and parking's relay.errorClass & co.) start with this.
KERNEL_ATTRIBUTE_PREFIX: Final = "relay."

# SQS: DelaySeconds accepts 0..900 (15 minutes) per message.
MAX_DELAY_SECONDS: Final = 900
# SQS: at most 10 message attributes per message; the chain's take 3, the original keeps the rest.
MAX_MESSAGE_ATTRIBUTES: Final = 10
MAX_ORIGINAL_ATTRIBUTES: Final = MAX_MESSAGE_ATTRIBUTES - len(RETRY_ATTRIBUTES)
ERROR_LIMIT: Final = 256


@dataclass(frozen=True)
class RetryPlan:
    """When and how the next attempt at a transiently failed message happens.

    ``attempt``: which retry the next attempt is (1 = the first retry). ``delay_seconds``: how long
    until then (0..900). ``next_attempt_at``: planning time + delay, UTC. ``first_failure_at``: the
    first transient failure of the message's chain. ``budget_seconds``: how long transient failures
    are retried in all (``math.inf`` when there is no time budget). ``error``: the failure's message,
    at most 256 characters.
    """

    attempt: int
    delay_seconds: int
    next_attempt_at: datetime
    first_failure_at: datetime
    budget_seconds: float
    error: str

    @property
    def deadline(self) -> datetime | None:
        """``first_failure_at + budget_seconds``: a failure from then on is parked (None: no budget)."""
        if math.isinf(self.budget_seconds):
            return None
        return self.first_failure_at + timedelta(seconds=self.budget_seconds)

    def budget_left_seconds(self, now: datetime) -> float | None:
        """Seconds of the budget left at ``now`` (never negative; None: no budget)."""
        deadline = self.deadline
        return None if deadline is None else max((deadline - now).total_seconds(), 0.0)

    def message_attributes(self) -> dict[str, dict[str, str]]:
        """The chain's three attributes in SendMessage format, for the copy this plan schedules."""
        return {
            ATTEMPT: {"DataType": "Number", "StringValue": str(self.attempt)},
            FIRST_FAILURE_AT: {"DataType": "Number", "StringValue": _epoch(self.first_failure_at)},
            LAST_ERROR: {"DataType": "String", "StringValue": self.error or "-"},
        }


class RetryBudgetSpent(PermanentError):
    """Transient failures went on for longer than the retry budget: the message is parked."""

    def __init__(
        self,
        *,
        first_failure_at: datetime,
        attempts: int,
        last_error: str,
        budget_seconds: float,
        now: datetime,
    ) -> None:
        lasted = (now - first_failure_at).total_seconds()
        super().__init__(
            f"transient failures lasted {lasted:.0f} s (since {_iso(first_failure_at)}), longer than the "
            f"retry budget of {budget_seconds:.0f} s; gave up after {attempts} attempts (last error: "
            f"{last_error}). Parked: redrive it once the dependency is healthy again; a redrive starts a "
            "new budget."
        )
        self.first_failure_at = first_failure_at
        self.attempts = attempts
        self.last_error = last_error
        self.budget_seconds = budget_seconds


def plan_retry(
    message_attributes: Mapping[str, Any] | None,
    *,
    error: BaseException | str,
    now: datetime,
    budget_seconds: float,
    base: float,
    cap: float,
    retry_after: float | None = None,
    jitter: float | random.Random | None = None,
) -> RetryPlan:
    """The next retry of a message whose attributes (Lambda event format:
    ``{"relay.attempt": {"stringValue": "3", "dataType": "Number"}}``) are ``message_attributes``, which
    failed transiently with ``error`` at ``now``. Raises ``RetryBudgetSpent`` when ``budget_seconds``
    have passed since the chain's first failure.

    ``retry_after``: the dependency's hint; defaults to ``error.retry_after`` when it has one.
    ``jitter``: as ``relay.backoff.backoff_delay`` takes it (seed a ``random.Random`` in tests).
    """
    now = now.astimezone(UTC)
    attributes = message_attributes or {}
    done = retries_done(attributes)
    first_failure_at = now
    if done:
        first = _moment_value(attributes.get(FIRST_FAILURE_AT))
        if first is not None:
            first_failure_at = min(first, now)
    message = error_text(error)
    if (now - first_failure_at).total_seconds() >= budget_seconds:
        raise RetryBudgetSpent(
            first_failure_at=first_failure_at,
            attempts=done + 1,
            last_error=message,
            budget_seconds=budget_seconds,
            now=now,
        )
    if retry_after is None and isinstance(error, BaseException):
        retry_after = getattr(error, "retry_after", None)
    attempt = done + 1
    delay = delay_seconds(attempt, base=base, cap=cap, retry_after=retry_after, jitter=jitter)
    return RetryPlan(
        attempt=attempt,
        delay_seconds=delay,
        next_attempt_at=now + timedelta(seconds=delay),
        first_failure_at=first_failure_at,
        budget_seconds=budget_seconds,
        error=message,
    )


def retries_done(message_attributes: Mapping[str, Any] | None) -> int:
    """The ``relay.attempt`` of a message (Lambda event format): which retry of its chain it is, 0 for
    a message that is not a retry copy (or whose attribute is unreadable: it starts a new chain)."""
    attempt = _int_value((message_attributes or {}).get(ATTEMPT))
    return attempt if attempt is not None and attempt > 0 else 0


def delay_seconds(
    attempt: int,
    *,
    base: float,
    cap: float,
    retry_after: float | None = None,
    jitter: float | random.Random | None = None,
) -> int:
    """The DelaySeconds of retry ``attempt``: exponential with jitter, at most ``min(cap, 900)``."""
    limit = max(min(cap, MAX_DELAY_SECONDS), 0)
    # Leave the jitter room under the limit: cut at the limit, every message that reached the cap
    # would come back in the same second.
    delay = min(backoff_delay(attempt, base=base, cap=limit / (1 + JITTER_FRACTION), jitter=jitter), limit)
    if retry_after is not None:
        delay = max(delay, min(math.ceil(max(float(retry_after), 0.0)), MAX_DELAY_SECONDS))
    return int(min(max(delay, 0), MAX_DELAY_SECONDS))


def retry_attributes(
    message_attributes: Mapping[str, Any] | None, plan: RetryPlan
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The re-sent copy's MessageAttributes: the original ones converted to SendMessage format
    (``stringValue``/``binaryValue``/``dataType`` -> ``StringValue``/``BinaryValue``/``DataType``, binary
    values decoded from the event's base64), without the kernel's stale ``relay.*`` ones, plus the
    plan's three. Returns ``(attributes, left_out)``: ``left_out`` names the original attributes that
    do not fit beside the chain's three (SQS allows 10); the caller decides what to do about them."""
    from relay.parking import _to_send_format  # one conversion of the event format, shared with parking

    kept: dict[str, dict[str, Any]] = {}
    left_out: list[str] = []
    for name in sorted(message_attributes or {}):
        if name.startswith(KERNEL_ATTRIBUTE_PREFIX):
            continue  # the kernel's bookkeeping of an earlier attempt or park: replaced, not copied
        converted = _to_send_format((message_attributes or {})[name])
        if converted is None:
            continue
        if len(kept) >= MAX_ORIGINAL_ATTRIBUTES:
            left_out.append(name)
            continue
        kept[name] = converted
    return {**kept, **plan.message_attributes()}, left_out


def parking_record(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` as ``relay.parking.park`` should see it: parking keeps the ``relay.firstFailureAt`` it
    finds as the DLQ message's, in its ISO-8601 form, so the chain's epoch seconds are turned into
    that form (the DLQ then shows when the chain's first failure happened, not when it was parked)."""
    attributes = record.get("messageAttributes") or {}
    first = attributes.get(FIRST_FAILURE_AT)
    if not isinstance(first, Mapping) or (first.get("dataType") or first.get("DataType")) != "Number":
        return record
    moment = _moment_value(first)
    converted = dict(attributes)
    if moment is None:
        del converted[FIRST_FAILURE_AT]  # unreadable: parking records the time of the park instead
    else:
        converted[FIRST_FAILURE_AT] = {"dataType": "String", "stringValue": _iso_millis(moment)}
    return {**record, "messageAttributes": converted}


def error_text(error: BaseException | str) -> str:
    """The failure's message (its class name when it has none), at most ``ERROR_LIMIT`` characters."""
    text = error if isinstance(error, str) else (str(error) or type(error).__name__)
    return text if len(text) <= ERROR_LIMIT else text[: ERROR_LIMIT - 1] + "…"


def _string_value(attribute: Any) -> str | None:
    if not isinstance(attribute, Mapping):
        return None
    value = attribute.get("stringValue", attribute.get("StringValue"))
    return str(value) if value is not None else None


def _int_value(attribute: Any) -> int | None:
    text = _string_value(attribute)
    try:
        return int(float(text)) if text is not None else None
    except (ValueError, OverflowError):
        return None


def _moment_value(attribute: Any) -> datetime | None:
    """Epoch seconds (the chain's Number), or an ISO-8601 time (the String parking writes)."""
    text = _string_value(attribute)
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
        return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
    if not math.isfinite(seconds):
        return None
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _epoch(moment: datetime) -> str:
    # Whole milliseconds: exact enough, and a Number SQS accepts (at most 38 digits).
    return f"{moment.timestamp():.3f}".rstrip("0").rstrip(".")


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _iso_millis(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
