"""Analytics: the archive of every order event in S3, and how it is read.

SNS delivers every event (raw) to the Firehose stream ``<stage>-orders-analytics``, which buffers them
into objects ``events/dt=<arrival day>/<stream>-1-<time>-<uuid>``, one envelope a line (JSON Lines;
infra/constructs/archive_stream.py), so one Athena table over ``events/`` reads them. Delivery is at
least once, so an event may be in two objects: ``read_archive`` keeps one copy per eventId and reports
copies whose payloads differ. Objects of one envelope each (``events/dt=…/<eventType>/<eventId>.json``,
written by a consumer before the archive moved to Firehose) are JSON Lines too, and read the same way.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from relay.envelope import Envelope, canonical_payload_sha256
from relay.errors import InvalidInput

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

PREFIX = "events"


@dataclass(frozen=True)
class ArchiveRead:
    """The archive as a reader sees it once duplicates are dropped."""

    events: dict[str, Envelope]  # eventId -> its first copy (in key order)
    copies: Counter[str]  # eventId -> how many copies were found (at-least-once delivery: may be > 1)
    conflicts: dict[str, set[str]]  # eventId -> its payloads' sha256, where copies differ (investigate)
    unreadable: list[str]  # "key:line" of lines that are not an event envelope


def read_archive(s3_client: S3Client, bucket: str, *, prefix: str = PREFIX + "/") -> ArchiveRead:
    """Every event archived under ``prefix``, one copy per eventId. Fine for a check or
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
