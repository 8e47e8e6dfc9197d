"""Verification by read-back: a generated report counts only once the public API serves what was
announced.

For ``ReportGenerated {reportId, agentId, url?, sha256}`` the verifier GETs the report from the
public report API, hashes the body and records ONE outcome per report:

* 2xx, same sha256      -> ``VERIFIED``;
* 2xx, other sha256     -> ``MISMATCH``: a permanent business outcome. It is recorded (the record is
  the evidence), counted as ``VerificationMismatch`` (the alarm watches that metric) and the message
  is acknowledged -- parking it would only hide the evidence in a DLQ and invite a pointless redrive;
* 404/410, report younger than ``VERIFY_MAX_AGE_SECONDS`` (from the envelope's ``occurredAt``) ->
  ReportNotVisibleYet, transient: the kernel schedules a retry (a delayed copy of the message, see
  ``relay.retry``) and the report is read again later (publication and CDN propagation lag). The age
  is measured from ``occurredAt`` because the envelope is the one thing every copy carries unchanged;
  a copy's SQS timestamps (sent, first receive) start again on each re-send;
* 404/410 at or past that age -> ``UNREACHABLE`` recorded;
* 429/5xx/timeouts/connection errors -> transient; other 4xx and 3xx -> permanent (parked with the
  reason).

SSRF guard: the verifier only ever requests URLs under ``REPORT_API_URL``. Without a ``url`` in the
event it requests ``{REPORT_API_URL}/reports/{reportId}``; an event ``url`` is used only when it has
the same scheme and host (and port) and lies under the base path, otherwise the event is parked as
InvalidInput without any request. Redirects are never followed (``reports._http``).

The record is ONE conditional put (``attribute_not_exists``): the record is the step's record, as in
every one-write step (``relay.entity_events``). It holds the event it was written for (``seen``:
eventId -> payload hash), and its condition makes every outcome final, even against a replay under a
different eventId. A redelivery learns what happened from the record, read first or returned by the
failed condition: the same event again is acknowledged, the same eventId with another payload is a
``PayloadConflict``, another event announcing other content for the report is parked. Records written
with a processed-event marker before (issue 33) are read the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from relay.consumer import RecordContext
from relay.ddb import apply_write
from relay.entity_events import payload_hash, seen_in
from relay.envelope import Envelope
from relay.errors import BusinessRejection, InvalidInput, PermanentError, TransientError, classify_http_status
from relay.observability import logger, record_metric
from reports._http import Digest, TooLarge, fetch_digest
from reports.events import ReportGenerated, parse_report_generated
from reports.store import Status, Verification, VerificationStore, verification_from_old
from reports.subscriptions import REPORT_GENERATED

WHAT = "report API"
MISMATCH_METRIC = "VerificationMismatch"
_OUTCOME_METRICS = {
    Status.VERIFIED: "ReportVerified",
    Status.MISMATCH: MISMATCH_METRIC,
    Status.UNREACHABLE: "ReportUnreachable",
}
_NOT_FOUND = (404, 410)


class ReportNotVisibleYet(TransientError):
    """The public API does not serve the report (yet); it is read again after a backoff."""


class ReportAlreadyRecorded(PermanentError):
    """The report already has a final verification for another sha256: not overwritten."""


class ReportTooLarge(BusinessRejection):
    """The public API served more bytes than ``VERIFY_MAX_BYTES``."""


class _Recorded(Exception):
    """Raised by the put's failed condition: the report already has a record (carried here)."""

    def __init__(self, existing: Verification | None) -> None:
        super().__init__("verification already recorded")
        self.existing = existing


def iso(moment: datetime) -> str:
    """ISO-8601 UTC with milliseconds and ``Z``: fixed width, so the strings sort in time order."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def delivery_attempts(ctx: RecordContext) -> int:
    """Which delivery of the report's ReportGenerated this is, counted across the retry chain.

    A transient failure is retried with a delayed copy of the message (``relay.retry``): each copy is a
    new SQS message whose ApproximateReceiveCount starts at 1 again, so the receive count alone would
    record ``attempts=1`` for a report read on its third try. ``relay.attempt`` (the copy's place in
    the chain) plus this copy's receives counts every earlier copy once and this one fully.
    """
    return ctx.retry_attempt + ctx.receive_count


def report_url(base_url: str, report_id: str, url: str | None) -> str:
    """The URL to read ``report_id`` from; InvalidInput (permanent) for a URL outside the report API."""
    base = base_url.rstrip("/")
    if url is None:
        return f"{base}/reports/{quote(report_id, safe='')}"
    refused = InvalidInput(
        f"report {report_id}: its url is not under the configured report API ({base}); not requested "
        "(the verifier never fetches arbitrary URLs). Parked: fix the producer, then redrive."
    )
    try:
        wanted, allowed = urlsplit(url), urlsplit(base)
        wanted_port, allowed_port = wanted.port, allowed.port
    except ValueError:
        raise refused from None
    same_origin = (
        wanted.scheme.lower() == allowed.scheme.lower()
        and (wanted.hostname or "") == (allowed.hostname or "")
        and wanted_port == allowed_port
        and wanted.username is None
        and wanted.password is None
    )
    base_path = allowed.path.rstrip("/") + "/"
    segments = unquote(wanted.path).split("/")
    if (
        not same_origin
        or not wanted.path.startswith(base_path)
        or any(segment in (".", "..") for segment in segments)
        or "\\" in unquote(wanted.path)
        or wanted.fragment
        or any(ord(c) < 0x21 for c in url)
    ):
        raise refused
    return url


class ReportApiClient:
    """The public report API (configured by base URL)."""

    def __init__(self, base_url: str, *, timeout_seconds: float, max_bytes: int) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_seconds = timeout_seconds
        self.max_bytes = max_bytes

    def url_for(self, event: ReportGenerated) -> str:
        return report_url(self.base_url, event.report_id, event.url)

    def digest(self, url: str) -> Digest:
        try:
            return fetch_digest(url, timeout=self.timeout_seconds, max_bytes=self.max_bytes, what=WHAT)
        except TooLarge as exc:
            raise ReportTooLarge(
                f"{exc}; not verified. Parked: raise VERIFY_MAX_BYTES or fix the report."
            ) from exc


@dataclass(frozen=True)
class VerificationDeps:
    store: VerificationStore
    report_api: ReportApiClient
    max_age_seconds: int


def verify_report(
    envelope: Envelope, ctx: RecordContext, deps: VerificationDeps, *, now: datetime
) -> Status | None:
    """Verify the report of a ReportGenerated once; returns the recorded status (None: already recorded)."""
    event = parse_report_generated(envelope)
    url = deps.report_api.url_for(event)  # the SSRF guard runs before anything else
    log = logger()
    log.append_keys(report_id=event.report_id, agent_id=event.agent_id)
    try:
        existing = deps.store.get(event.report_id)
        if existing is not None:
            # A cheap early exit (no GET for a redelivery); correctness comes from the conditional put.
            _already_recorded(existing, event, envelope)
            return None

        digest = deps.report_api.digest(url)
        status = _outcome(digest, event, envelope, now, deps.max_age_seconds)
        verification = Verification(
            report_id=event.report_id,
            agent_id=event.agent_id,
            status=status,
            expected_sha256=event.sha256,
            actual_sha256=digest.sha256,
            url=url,
            checked_at=iso(now),
            attempts=delivery_attempts(ctx),
            event_id=envelope.event_id,
            occurred_at=iso(envelope.occurred_at),
            seen={envelope.event_id: payload_hash(envelope)},
        )
        try:
            record = deps.store.record_write(verification, on_condition_failed=_recorded)
            apply_write(record, ddb_client=deps.store.ddb)
        except _Recorded as exc:
            # Another delivery recorded it between our read and our write.
            if exc.existing is not None:
                _already_recorded(exc.existing, event, envelope)
            return None
        record_metric(_OUTCOME_METRICS[status], event_type=envelope.event_type)
        _log_outcome(verification)
        return status
    finally:
        log.remove_keys(["report_id", "agent_id"])


def _recorded(old: dict[str, Any] | None) -> Exception:
    return _Recorded(verification_from_old(old))


def _outcome(
    digest: Digest, event: ReportGenerated, envelope: Envelope, now: datetime, max_age_seconds: int
) -> Status:
    if 200 <= digest.status < 300:
        return Status.VERIFIED if digest.sha256 == event.sha256 else Status.MISMATCH
    if digest.status in _NOT_FOUND:
        age = (now - envelope.occurred_at).total_seconds()
        if age >= max_age_seconds:
            return Status.UNREACHABLE
        raise ReportNotVisibleYet(
            f"{WHAT} answered {digest.status} for report {event.report_id}, generated {age:.0f} s ago; "
            f"reading it again later (recorded UNREACHABLE after {max_age_seconds} s).",
            retry_after=digest.retry_after,
        )
    if 300 <= digest.status < 400:
        raise BusinessRejection(
            f"{WHAT} redirected report {event.report_id} (HTTP {digest.status}); redirects are not followed "
            "(SSRF guard). Parked: point REPORT_API_URL at the host that serves the reports, then redrive."
        )
    error = classify_http_status(digest.status, digest.text, retry_after=digest.retry_after, what=WHAT)
    if error is None:  # pragma: no cover - every status < 400 is handled above
        raise TransientError(f"{WHAT} answered HTTP {digest.status}; retrying.")
    raise error


def _already_recorded(existing: Verification, event: ReportGenerated, envelope: Envelope) -> None:
    # The record's own event again: the same payload is a duplicate, another one a PayloadConflict.
    same_event = envelope.event_id in existing.seen and seen_in(existing.seen, envelope)
    if same_event or (existing.expected_sha256 == event.sha256 and existing.agent_id == event.agent_id):
        record_metric("Duplicate", event_type=REPORT_GENERATED)
        logger().info(
            "report already verified; acknowledged without effect", extra={"status": str(existing.status)}
        )
        return
    raise ReportAlreadyRecorded(
        f"report {event.report_id} was already recorded {existing.status} for agent {existing.agent_id} "
        f"and sha256 {existing.expected_sha256[:12]}…; this ReportGenerated says agent {event.agent_id} "
        f"and sha256 {event.sha256[:12]}…. Not applied: one verification per report. If the report was "
        "regenerated, publish it under a new reportId."
    )


def _log_outcome(verification: Verification) -> None:
    extra = {
        "status": str(verification.status),
        "attempts": verification.attempts,
        "expected_sha256": verification.expected_sha256[:12],
        "actual_sha256": (verification.actual_sha256 or "")[:12] or None,
    }
    if verification.status is Status.VERIFIED:
        logger().info("report verified", extra=extra)
    else:
        logger().warning(f"report {verification.status.lower()}", extra=extra)
