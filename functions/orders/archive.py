"""Analytics: the archive of every order event in S3, and how it is read.

Two layouts share the bucket's ``events/dt=YYYY-MM-DD/`` prefix, both JSON Lines (one envelope a line),
so one Athena table over ``events/`` reads them both:
- **today's**: SNS delivers every event (raw) to the Firehose stream ``<stage>-orders-analytics``, which
  buffers them into objects ``events/dt=<arrival day>/<stream>-1-<time>-<uuid>``, one line each
  (infra/constructs/archive_stream.py). Delivery is at least once, so an event may be in two objects;
  ``read_archive`` keeps one copy per eventId and reports copies whose payloads differ;
- **the earlier one**, below: one object per event, written by the analytics consumer. The consumer
  stays, unsubscribed, to drain what its queue held at the deploy; its objects stay readable.

The earlier layout: every order event as one S3 object, written once per eventId.

Key: ``events/dt={YYYY-MM-DD}/{eventType}/{eventId}.json`` (the date of ``occurredAt``, UTC) -- a
Hive-style partition a daily export (Athena, Glue, a plain ``aws s3 sync``) reads one day at a time.
The body is the envelope as JSON, one line, newline-terminated, so a day's objects concatenate into
JSON Lines.

Idempotent by construction: the key is a function of the event, and the write is a CONDITIONAL
PutObject (``If-None-Match: *``), so a redelivery never overwrites what was archived. When the object
already exists (HTTP 412), its ``payload-sha256`` metadata (the kernel's canonical business-content
hash, the same one the processed-event markers use) is compared: equal -> a duplicate, acknowledged;
different -> PayloadConflict, parked. A HeadObject-then-Put would leave a window in which two
consumers both see "absent" and the later one silently overwrites; the conditional write has none.
"""

from __future__ import annotations

import enum
import re
from collections import Counter
from dataclasses import dataclass
from datetime import UTC
from typing import TYPE_CHECKING

from relay.envelope import Envelope, canonical_payload_sha256
from relay.errors import DependencyUnavailable, InvalidInput, PayloadConflict
from relay.observability import logger, record_metric

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

PREFIX = "events"
HASH_METADATA = "payload-sha256"  # S3 returns user metadata keys in lower case
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class Archived(enum.Enum):
    WRITTEN = "WRITTEN"
    DUPLICATE = "DUPLICATE"


def archive_key(envelope: Envelope) -> str:
    for name, value in (("eventType", envelope.event_type), ("eventId", envelope.event_id)):
        if not _SAFE.match(value):
            raise InvalidInput(
                f"event {envelope.event_id!r}: {name} {value!r} cannot be part of an S3 key "
                "(letters, digits, '.', '_', '-' only). Parked: fix the producer."
            )
    day = envelope.occurred_at.astimezone(UTC).strftime("%Y-%m-%d")
    return f"{PREFIX}/dt={day}/{envelope.event_type}/{envelope.event_id}.json"


def _error_code(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


def archive_event(envelope: Envelope, *, s3_client: S3Client, bucket: str) -> Archived:
    key = archive_key(envelope)
    digest = canonical_payload_sha256(envelope)
    try:
        s3_client.put_object(
            Bucket=bucket,
            Key=key,
            Body=(envelope.to_json() + "\n").encode("utf-8"),
            ContentType="application/json",
            Metadata={HASH_METADATA: digest, "event-type": envelope.event_type},
            IfNoneMatch="*",
        )
    except Exception as exc:
        code = _error_code(exc)
        if code == "ConditionalRequestConflict":
            # S3's 409 for two conditional writes of one key racing: the other one will win; retry
            # to find out whether it wrote the same event.
            raise DependencyUnavailable(f"concurrent write of s3://{bucket}/{key}; retrying") from exc
        if code not in ("PreconditionFailed", "412"):
            raise  # classified by the consumer
        return _compare(envelope, s3_client=s3_client, bucket=bucket, key=key, digest=digest)
    record_metric("EventArchived", event_type=envelope.event_type)
    return Archived.WRITTEN


def _compare(envelope: Envelope, *, s3_client: S3Client, bucket: str, key: str, digest: str) -> Archived:
    head = s3_client.head_object(Bucket=bucket, Key=key)
    stored = str((head.get("Metadata") or {}).get(HASH_METADATA, ""))
    if stored == digest:
        record_metric("Duplicate", event_type=envelope.event_type)
        logger().info("event already archived; acknowledged without effect", extra={"key": key})
        return Archived.DUPLICATE
    record_metric("PayloadConflict", event_type=envelope.event_type)
    logger().error("payload conflict", extra={"key": key, "stored_sha256": stored, "received_sha256": digest})
    raise PayloadConflict(
        f"event {envelope.event_id} was already archived at s3://{bucket}/{key} with a different payload "
        f"(sha256 {stored[:12] or 'unknown'}… stored, {digest[:12]}… received); not overwritten. "
        "Investigate the producer."
    )


@dataclass(frozen=True)
class ArchiveRead:
    """The archive as a reader sees it once duplicates are dropped."""

    events: dict[str, Envelope]  # eventId -> its first copy (in key order)
    copies: Counter[str]  # eventId -> how many copies were found (at-least-once delivery: may be > 1)
    conflicts: dict[str, set[str]]  # eventId -> its payloads' sha256, where copies differ (investigate)
    unreadable: list[str]  # "key:line" of lines that are not an event envelope


def read_archive(s3_client: S3Client, bucket: str, *, prefix: str = PREFIX + "/") -> ArchiveRead:
    """Every event archived under ``prefix``, in either layout, one copy per eventId. Fine for a check or
    a day's export; a query engine over the bucket does the same with ``row_number() over (partition by
    eventId)``."""
    events: dict[str, Envelope] = {}
    digests: dict[str, set[str]] = {}
    copies: Counter[str] = Counter()
    unreadable: list[str] = []
    for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for entry in page.get("Contents", []):
            body = s3_client.get_object(Bucket=bucket, Key=entry["Key"])["Body"].read()
            for number, line in enumerate(body.splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    envelope = Envelope.from_json(line)
                except InvalidInput:
                    unreadable.append(f"{entry['Key']}:{number}")
                    continue
                copies[envelope.event_id] += 1
                events.setdefault(envelope.event_id, envelope)
                digests.setdefault(envelope.event_id, set()).add(canonical_payload_sha256(envelope))
    conflicts = {event_id: found for event_id, found in digests.items() if len(found) > 1}
    return ArchiveRead(events=events, copies=copies, conflicts=conflicts, unreadable=unreadable)
