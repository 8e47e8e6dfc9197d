"""The scores HTTP API's request and response models (pydantic; camelCase on the wire).

These models ARE the API contract: the resolver validates requests against them and the checked-in
``openapi.json`` is generated from them.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Literal

from pydantic import ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from relay.api_models import ApiModel, ErrorResponse, FieldError
from scores.hours import HOUR, InstantOutOfRange, hour_start, normalise_hour

# A snapshot freezes the hour's score when it is first computed: a snapshot of an hour far in the
# future would be a permanent wrong answer. Scheduler fires at the top of the hour, so the current
# hour and (clock skew) the next one are accepted.
MAX_HOURS_AHEAD = 1
# Verifications start with the Unix epoch: the OpenAPI document says so with a pattern on the year.
FIRST_YEAR = 1970
_YEAR_FROM_1970 = r"^(?:19[7-9][0-9]|[2-9][0-9]{3})-"
_YEAR_FROM_1970_RE = re.compile(_YEAR_FROM_1970)


class SnapshotHourAhead(Exception):
    """The hour is further ahead of now than MAX_HOURS_AHEAD. Not a ValueError, so pydantic lets it
    through instead of making it a 400: the request is valid, it is too early for it (409)."""


class SnapshotRequest(ApiModel):
    """``POST /score-snapshots`` body, as the API Destination sends it (the rule passes ``$.detail``)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    snapshot_hour: str = Field(
        description=(
            "Any ISO-8601 date-time with a time zone, from 1970 on; the snapshot is for the UTC hour it "
            "falls in (EventBridge Scheduler's <aws.scheduler.scheduled-time> is accepted as is). An hour "
            f"more than {MAX_HOURS_AHEAD} hour ahead of now is answered 409: too early, not invalid"
        ),
        min_length=1,
        max_length=64,
        examples=["2026-11-29T10:00:00Z"],
        json_schema_extra={"format": "date-time", "pattern": _YEAR_FROM_1970},
    )

    @field_validator("snapshot_hour")
    @classmethod
    def _hour(cls, value: str) -> str:
        if not _YEAR_FROM_1970_RE.match(value):
            raise ValueError(
                f"must be an ISO-8601 date-time in {FIRST_YEAR} or later (there are no verifications "
                "before), e.g. 2026-11-29T10:00:00Z"
            )
        try:
            hour: str | None = normalise_hour(value)
        except InstantOutOfRange:  # beyond 9999-12-31 in UTC: ahead of now, whatever now is
            hour = None
        if hour is None or hour_start(hour) > datetime.now(UTC) + MAX_HOURS_AHEAD * HOUR:
            raise SnapshotHourAhead(
                f"snapshotHour is more than {MAX_HOURS_AHEAD} hour ahead of now; a snapshot of a future hour "
                "would be frozen before its verifications exist. Send it once the hour has come."
            )
        return hour


class SnapshotAccepted(ApiModel):
    snapshot_hour: str = Field(description="The normalised UTC hour", examples=["2026-11-29T10:00:00Z"])
    status: Literal["ACCEPTED"] = "ACCEPTED"


class ScoreSnapshotView(ApiModel):
    snapshot_hour: str = Field(examples=["2026-11-29T10:00:00Z"])
    score: str = Field(description="(verified + 1) / (total + 2), 4 decimal places", examples=["0.7500"])
    verified: int
    mismatched: int
    unreachable: int
    total: int = Field(description="verified + mismatched + unreachable")
    counted_before: str = Field(description="Verifications checked before this instant are counted")
    computed_at: str


class AgentScores(ApiModel):
    agent_id: str
    snapshots: list[ScoreSnapshotView]
    next_from: str | None = Field(
        None, description="Present when more snapshots follow: pass it as `from` to read them"
    )


__all__ = ["ErrorResponse", "FieldError"]
