"""The event envelope every Relay message carries, and the deterministic eventId builder.

On the wire the fields are camelCase (``eventId``, ``occurredAt``...); in Python they are snake_case.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from relay.errors import InvalidInput, UnknownVersion

SUPPORTED_MAJOR_VERSIONS = frozenset({1})
_TRACEPARENT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")

# Fixed namespace: changing it would change every eventId and defeat deduplication of re-publishes.
_EVENT_ID_NAMESPACE = uuid.UUID("6f1d1a3e-6b2a-5c1e-9a57-1f0d0e6c7a11")


class _Model(BaseModel):
    # Unknown fields are ignored, not rejected: a minor version may add fields (additive by contract).
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True, extra="ignore")


class ClaimCheckRef(_Model):
    """Where a large payload lives in S3, with the sha256 (hex) and size that reading must verify."""

    bucket: str = Field(min_length=1)
    key: str = Field(min_length=1)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0)


class Envelope(_Model):
    event_id: str = Field(min_length=1)
    event_type: str = Field(min_length=1)
    event_version: str = Field(pattern=r"^\d+\.\d+$")
    occurred_at: AwareDatetime
    correlation_id: str = Field(min_length=1)
    causation_id: str | None = None
    ids: dict[str, str] = Field(default_factory=dict)
    payload: dict[str, Any] | None = None
    claim_check: ClaimCheckRef | None = None
    # The W3C traceparent of the span that produced the event (relay.tracing): its consumers' spans join
    # that trace. Outside the payload hash; a malformed one is dropped, never a reason to park.
    traceparent: str | None = None

    @field_validator("traceparent", mode="before")
    @classmethod
    def _valid_traceparent(cls, value: Any) -> str | None:
        return value if isinstance(value, str) and _TRACEPARENT.fullmatch(value) else None

    @field_validator("event_version")
    @classmethod
    def _supported_major(cls, value: str) -> str:
        major = int(value.split(".", 1)[0])
        if major not in SUPPORTED_MAJOR_VERSIONS:
            # Raised as-is (not a ValueError) so it surfaces as the permanent UnknownVersion.
            supported = ", ".join(f"{m}.x" for m in sorted(SUPPORTED_MAJOR_VERSIONS))
            raise UnknownVersion(
                f"eventVersion {value} is not supported (supported: {supported}); "
                "parked. Deploy a consumer that understands it, then redrive."
            )
        return value

    @model_validator(mode="after")
    def _payload_xor_claim_check(self) -> Envelope:
        if (self.payload is None) == (self.claim_check is None):
            raise ValueError("exactly one of payload and claimCheck must be set")
        return self

    @property
    def major_version(self) -> int:
        return int(self.event_version.split(".", 1)[0])

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, exclude_none=True)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> Envelope:
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            raise InvalidInput(f"not a valid Relay envelope: {_describe(exc)}") from exc

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Envelope:
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise InvalidInput(f"not a valid Relay envelope: {_describe(exc)}") from exc


def _describe(exc: ValidationError) -> str:
    # Field locations and messages only: never echo input values (they may hold personal data).
    parts = [f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()]
    return "; ".join(parts[:8])


def build_event_id(*parts: str) -> str:
    """Deterministic eventId (uuid5) from the business identity of a fact.

    Re-publishing the same fact must reuse the id -- a fresh uuid per retry would defeat dedupe.
    The parts are JSON-encoded before hashing, so ("a:b", "c") and ("a", "b:c") differ.
    """
    if not parts or any(not isinstance(p, str) or not p for p in parts):
        raise ValueError(f"build_event_id needs one or more non-empty strings, got {parts!r}")
    return str(uuid.uuid5(_EVENT_ID_NAMESPACE, json.dumps(list(parts), separators=(",", ":"))))


def new_envelope(
    event_type: str,
    *,
    identity: Sequence[str],
    ids: Mapping[str, str],
    payload: Mapping[str, Any] | None = None,
    claim_check: ClaimCheckRef | None = None,
    correlation_id: str,
    causation_id: str | None = None,
    event_version: str = "1.0",
    occurred_at: datetime | None = None,
    traceparent: str | None = None,
) -> Envelope:
    """Build an envelope whose eventId is ``build_event_id(event_type, *identity)``."""
    if isinstance(identity, str):
        raise TypeError("identity must be a sequence of strings, e.g. (operation_id, 'payment'), not one str")
    return Envelope(
        event_id=build_event_id(event_type, *identity),
        event_type=event_type,
        event_version=event_version,
        occurred_at=occurred_at or datetime.now(UTC),
        correlation_id=correlation_id,
        causation_id=causation_id,
        ids=dict(ids),
        payload=dict(payload) if payload is not None else None,
        claim_check=claim_check,
        traceparent=traceparent or _current_traceparent(),
    )


def _current_traceparent() -> str | None:
    from relay.tracing import traceparent

    return traceparent()


def canonical_json(value: Any) -> str:
    """Sorted keys, compact separators, UTF-8 kept: the same data always gives the same text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_payload_sha256(envelope: Envelope) -> str:
    """sha256 (hex) of the business content: eventType, ids and payload (or claim-check content).

    occurredAt, correlationId and eventVersion are left out: re-publishing the same fact later (new
    timestamp, new trace) must hash equal. For a claim check only the content identity (sha256,
    size) counts, so re-storing the same bytes under another key is not a conflict.
    """
    content: dict[str, Any] = {"eventType": envelope.event_type, "ids": envelope.ids}
    if envelope.claim_check is not None:
        content["claimCheck"] = {"sha256": envelope.claim_check.sha256, "size": envelope.claim_check.size}
    else:
        content["payload"] = envelope.payload
    return hashlib.sha256(canonical_json(content).encode("utf-8")).hexdigest()
