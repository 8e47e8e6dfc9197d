"""Notifier: notification queue (ReportGenerated via SNS) -> report-ready webhook, at most once per
report. Domain: ``reports.notification``."""

from __future__ import annotations

from relay.consumer import queue_handler
from reports.notification import notify_report_ready
from reports.settings import NOTIFIER
from reports.wiring import wiring

handler = queue_handler(
    wiring.checked(NOTIFIER), lambda w, envelope, _ctx: notify_report_ready(envelope, w.notification)
)
