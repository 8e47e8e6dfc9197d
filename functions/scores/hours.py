"""Snapshot hours: any ISO-8601 instant -> the UTC hour it falls in, as one canonical string.

``2026-11-29T10:00:00Z`` (EventBridge Scheduler's ``<aws.scheduler.scheduled-time>``),
``2026-11-29T11:37:12+01:00`` and ``2026-11-29T10:59:59.999Z`` are all the hour
``2026-11-29T10:00:00Z``. The canonical text is the identity of the job (its eventId) and part of
the snapshot's sort key, so it must never vary with how the caller wrote the time.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

HOUR = timedelta(hours=1)
_MAX_LENGTH = 64
# The first and last hours a canonical hour text can name (datetime's years 1 to 9999).
FIRST_HOUR = "0001-01-01T00:00:00Z"
LAST_HOUR = "9999-12-31T23:00:00Z"


class InstantOutOfRange(ValueError):
    """A valid ISO-8601 instant whose UTC time falls outside the years 1 to 9999 (e.g.
    ``0001-01-01T00:00:00+01:00``): ``later`` tells which end it is beyond."""

    def __init__(self, later: bool) -> None:
        super().__init__(f"is {'after the year 9999' if later else 'before the year 1'} in UTC")
        self.later = later


def parse_instant(text: str) -> datetime:
    """An aware datetime; ValueError (with a message fit for a 400 field error) otherwise."""
    if not isinstance(text, str) or not text.strip() or len(text) > _MAX_LENGTH:
        raise ValueError("must be an ISO-8601 date-time with a time zone, e.g. 2026-11-29T10:00:00Z")
    raw = text.strip()
    if raw[-1:] in ("z", "Z"):
        raw = raw[:-1] + "+00:00"  # Python 3.11's fromisoformat accepts "Z", but not "z"
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise ValueError(
            "must be an ISO-8601 date-time with a time zone, e.g. 2026-11-29T10:00:00Z"
        ) from None
    if "T" not in raw.upper() and " " not in raw:
        raise ValueError("must be a date-time, not a date, e.g. 2026-11-29T10:00:00Z")
    if moment.tzinfo is None or moment.utcoffset() is None:
        # A local time without a zone names a different hour on every machine: refuse to guess.
        raise ValueError("must include a time zone (Z or ±hh:mm), e.g. 2026-11-29T10:00:00Z")
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise InstantOutOfRange(later=moment.year == datetime.max.year) from None


def floor_hour(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def hour_text(moment: datetime) -> str:
    """The canonical text of the hour ``moment`` falls in: ``YYYY-MM-DDTHH:00:00Z``."""
    return floor_hour(moment).strftime("%Y-%m-%dT%H:00:00Z")


def normalise_hour(text: str) -> str:
    return hour_text(parse_instant(text))


def hour_start(hour: str) -> datetime:
    """The start of a canonical hour text (inverse of ``hour_text``)."""
    return datetime.strptime(hour, "%Y-%m-%dT%H:00:00Z").replace(tzinfo=UTC)


def iso_millis(moment: datetime) -> str:
    """ISO-8601 UTC with milliseconds: the format of verification ``checkedAt`` (sorts as text)."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
