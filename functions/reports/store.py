"""Data access for the verifications table -- the ONLY reports module that knows attribute names.

Verifications table (``VERIFICATIONS_TABLE``; pk ``pk`` S, sk ``sk`` S, TTL ``expiresAt``), one item
per report:

    pk = REPORT#<reportId>, sk = VERIFICATION, kind = verification,
    reportId, agentId, status (VERIFIED | MISMATCH | UNREACHABLE), expectedSha256, actualSha256
    (absent when the report could not be read), url, checkedAt (ISO-8601 UTC, millisecond
    precision, so the strings sort in time order), attempts (deliveries of the event, counted across
    the consumer's retry chain: ``reports.verification.delivery_attempts``), eventId, occurredAt (when
    the report was generated), seen (the event it was written for -> its payload hash; absent on a
    record written before issue 33).

No ``expiresAt``: a verification is the evidence an agent's score is computed from, so it is kept.

The scores service reads ``agentId``, ``status`` and ``checkedAt`` of these items (its own
``scores.store`` repeats the names: the two services are separate code assets). Changing them is
a cross-service contract change.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from relay import entity_events
from relay.ddb import BusinessWrite, OnConditionFailed, deserialize_item, put, serialize_item

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

VERIFICATION_SK = "VERIFICATION"
VERIFICATION_KIND = "verification"


class Status(enum.StrEnum):
    VERIFIED = "VERIFIED"
    MISMATCH = "MISMATCH"
    UNREACHABLE = "UNREACHABLE"


def verification_key(report_id: str) -> dict[str, str]:
    return {"pk": f"REPORT#{report_id}", "sk": VERIFICATION_SK}


@dataclass(frozen=True)
class Verification:
    report_id: str
    agent_id: str
    status: Status
    expected_sha256: str
    actual_sha256: str | None
    url: str
    checked_at: str
    attempts: int
    event_id: str
    occurred_at: str
    # The event the record was written for -> its payload hash (``relay.entity_events``); empty for a
    # record written before issue 33, whose marker was in the idempotency table.
    seen: Mapping[str, str] = field(default_factory=dict)

    def to_item(self) -> dict[str, Any]:
        item: dict[str, Any] = {
            **verification_key(self.report_id),
            "kind": VERIFICATION_KIND,
            "reportId": self.report_id,
            "agentId": self.agent_id,
            "status": str(self.status),
            "expectedSha256": self.expected_sha256,
            "url": self.url,
            "checkedAt": self.checked_at,
            "attempts": self.attempts,
            "eventId": self.event_id,
            "occurredAt": self.occurred_at,
        }
        if self.actual_sha256 is not None:
            item["actualSha256"] = self.actual_sha256
        if self.seen:
            item[entity_events.SEEN_ATTRIBUTE] = dict(self.seen)
        return item

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> Verification:
        return cls(
            report_id=str(item["reportId"]),
            agent_id=str(item["agentId"]),
            status=Status(str(item["status"])),
            expected_sha256=str(item["expectedSha256"]),
            actual_sha256=str(item["actualSha256"]) if item.get("actualSha256") else None,
            url=str(item.get("url", "")),
            checked_at=str(item["checkedAt"]),
            attempts=int(item.get("attempts", 1)),
            event_id=str(item.get("eventId", "")),
            occurred_at=str(item.get("occurredAt", "")),
            seen={str(k): str(v) for k, v in dict(item.get(entity_events.SEEN_ATTRIBUTE) or {}).items()},
        )


class VerificationStore:
    def __init__(self, *, verifications_table: str, ddb_client: DynamoDBClient) -> None:
        self.verifications_table = verifications_table
        self.ddb = ddb_client

    def get(self, report_id: str) -> Verification | None:
        response = self.ddb.get_item(
            TableName=self.verifications_table,
            Key=serialize_item(verification_key(report_id)),
            ConsistentRead=True,
        )
        item = response.get("Item")
        return Verification.from_item(deserialize_item(item)) if item else None

    def record_write(
        self, verification: Verification, *, on_condition_failed: OnConditionFailed
    ) -> BusinessWrite:
        """The put of the ONE record of a report, its step's record. Every status is final, so the
        condition is simply "no record yet": a duplicate or a replay (another eventId for the same
        report) can never overwrite a recorded outcome."""
        return put(
            self.verifications_table,
            verification.to_item(),
            "attribute_not_exists(pk)",
            on_condition_failed=on_condition_failed,
        )


def verification_from_old(item: Mapping[str, Any] | None) -> Verification | None:
    """The stored record as returned with a failed condition (ALL_OLD, already plain values)."""
    if not item or "status" not in item:
        return None
    return Verification.from_item(item)
