"""The fan-out contract of ``report-events``: the event type an external producer publishes, and the
filter both of the service's queues (verifier, notifications) subscribe with. Standard library only:
the CDK app imports this module without the Lambda runtime's dependencies."""

from __future__ import annotations

from typing import Final

REPORT_GENERATED: Final = "ReportGenerated"
REPORT_GENERATED_FILTER: Final[dict[str, list[str]]] = {"eventType": [REPORT_GENERATED]}
