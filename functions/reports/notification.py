"""Tell subscribers a report is ready: ``POST {NOTIFY_WEBHOOK_URL}`` once per report.

An HTTP call cannot join a DynamoDB transaction, so the send is guarded twice (relay.side_effects):
Powertools idempotency remembers a completed notification (a redelivery returns the stored result
without calling again), and the webhook gets ``Idempotency-Key: {reportId}:report-ready`` so that a
crash between its 2xx and our record cannot make a well-behaved subscriber act twice.

The same report announced again with a different body (another agent or url) is a PayloadConflict:
parked with the reason, never sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from relay.envelope import Envelope
from relay.observability import logger, record_metric
from relay.side_effects import OnceWebhook
from reports.events import parse_report_generated

WHAT = "report-ready webhook"
SIDE_EFFECT = "report-ready"


def notification_key(report_id: str) -> str:
    return f"{report_id}:report-ready"


@dataclass(frozen=True)
class NotificationDeps:
    webhook: OnceWebhook  # the report-ready webhook, each report announced at most once
    report_api_url: str | None = None


def notify_report_ready(envelope: Envelope, deps: NotificationDeps) -> dict[str, Any]:
    event = parse_report_generated(envelope)
    url = event.url
    if url is None and deps.report_api_url:
        url = f"{deps.report_api_url.rstrip('/')}/reports/{event.report_id}"
    body = {"reportId": event.report_id, "agentId": event.agent_id, "url": url}
    result, sent = deps.webhook.send_once(SIDE_EFFECT, body, downstream_key=notification_key(event.report_id))
    if sent:
        record_metric("ReportReadyNotified", event_type=envelope.event_type)
        logger().info("report-ready notification sent", extra={"report_id": event.report_id})
    else:
        logger().info(
            "report-ready notification already sent; not sent again", extra={"report_id": event.report_id}
        )
    return result
