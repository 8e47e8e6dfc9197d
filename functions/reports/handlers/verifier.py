"""Verifier: verifier queue (ReportGenerated via SNS) -> read the report back from the public report
API -> one VERIFIED / MISMATCH / UNREACHABLE record. Domain: ``reports.verification``."""

from __future__ import annotations

from relay.consumer import queue_handler
from reports.settings import VERIFIER
from reports.verification import verify_report
from reports.wiring import wiring

handler = queue_handler(
    wiring.checked(VERIFIER),
    lambda w, envelope, ctx: verify_report(envelope, ctx, w.verification, now=w.clock()),
)
