"""``ReportGenerated``: the fact an external producer publishes to ``report-events``.

Payload ``{reportId, agentId, url?, sha256, ...}`` (camelCase; unknown fields are ignored, a minor
version may add them). ``reportId``/``agentId`` may also come from the envelope's ``ids``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from relay.envelope import Envelope
from relay.errors import InvalidInput
from reports.subscriptions import REPORT_GENERATED

__all__ = ["REPORT_GENERATED"]

_IDENTIFIER = r"^[A-Za-z0-9][A-Za-z0-9._:@-]*$"


class ReportGenerated(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True, extra="ignore")

    # No "/" in the id: it becomes a path segment of the report API URL and part of table keys.
    report_id: str = Field(min_length=1, max_length=256, pattern=_IDENTIFIER)
    agent_id: str = Field(min_length=1, max_length=256, pattern=_IDENTIFIER)
    url: str | None = Field(None, min_length=1, max_length=2048)
    sha256: str = Field(pattern=r"^[0-9a-fA-F]{64}$")

    @field_validator("sha256")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.lower()


def parse_report_generated(envelope: Envelope) -> ReportGenerated:
    """The event's business content; InvalidInput (permanent: parked) when it is not a valid one."""
    if envelope.event_type != REPORT_GENERATED:
        raise InvalidInput(
            f"event {envelope.event_id} is a {envelope.event_type}, not a {REPORT_GENERATED}; the "
            "subscription filter should not have let it through. Parked: check the filter policy."
        )
    if envelope.payload is None:
        raise InvalidInput(
            f"{REPORT_GENERATED} {envelope.event_id} carries a claim check instead of a payload; reports "
            "events are small and must be inline. Parked: fix the producer, then redrive."
        )
    data: dict[str, Any] = {**envelope.payload}
    for name in ("reportId", "agentId"):
        if name not in data and name in envelope.ids:
            data[name] = envelope.ids[name]
    try:
        return ReportGenerated.model_validate(data)
    except ValidationError as exc:
        # Field locations and messages only: never echo input values.
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()
        )
        raise InvalidInput(
            f"{REPORT_GENERATED} {envelope.event_id} is invalid ({problems}). Parked: fix the producer, "
            "then redrive."
        ) from None
