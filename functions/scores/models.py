"""The scores HTTP API's request and response models (pydantic; camelCase on the wire).

These models ARE the API contract: the resolver validates requests against them and the checked-in
``openapi.json`` is generated from them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from scores.hours import HOUR, hour_start, normalise_hour

# A snapshot freezes the hour's score when it is first computed: a snapshot of an hour far in the
# future would be a permanent wrong answer. Scheduler fires at the top of the hour, so the current
# hour and (clock skew) the next one are accepted.
MAX_HOURS_AHEAD = 1


class ApiModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class SnapshotRequest(ApiModel):
    """``POST /score-snapshots`` body, as the API Destination sends it (the rule passes ``$.detail``)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    snapshot_hour: str = Field(
        description=(
            "Any ISO-8601 date-time with a time zone; the snapshot is for the UTC hour it falls in "
            "(EventBridge Scheduler's <aws.scheduler.scheduled-time> is accepted as is)"
        ),
        min_length=1,
        max_length=64,
        examples=["2026-11-29T10:00:00Z"],
    )

    @field_validator("snapshot_hour")
    @classmethod
    def _hour(cls, value: str) -> str:
        hour = normalise_hour(value)
        if hour_start(hour) > datetime.now(UTC) + MAX_HOURS_AHEAD * HOUR:
            raise ValueError(
                f"is more than {MAX_HOURS_AHEAD} hour ahead of now; a snapshot of a future hour would be "
                "frozen before its verifications exist"
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


class FieldError(ApiModel):
    field: str
    message: str


class ErrorResponse(ApiModel):
    error: str
    message: str
    fields: list[FieldError] | None = None
