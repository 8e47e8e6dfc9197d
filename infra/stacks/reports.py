"""The `reports` stack: "publish accepted" is not business success — a generated report counts only once
the verifier has read it back from the public report API and its sha256 matches.

external producer → SNS report-events ─┬→ verifier queue → verifier → GET public API, compare sha256
                                       └→ notification queue → notifier → HTTPS webhook (once)
"""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Duration
from constructs import Construct
from reports import settings as env
from reports.subscriptions import REPORT_GENERATED_FILTER

from infra.config import StageConfig
from infra.constructs.fanout_topic import FanoutTopic, allowlist_filter
from infra.constructs.monitoring import KernelMetric, ServiceMonitoring
from infra.constructs.outputs import work_queues_output
from infra.constructs.queue_consumer import QueueConsumer
from infra.constructs.reliable_queue import ReliableQueue
from infra.constructs.tables import ReliableTable, idempotency_table
from infra.stacks.base import Platform, RelayStack

VERIFIER_MAX_RECEIVE_COUNT = 12
VERIFIER_BACKOFF_BASE_SECONDS = 30


class ReportsStack(RelayStack):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: StageConfig, platform: Platform, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, config=config, service="reports", platform=platform, **kwargs)
        settings = config.reports
        naming, keep, functions, queues = self.naming, self.removal_policy, self.functions, config.queues
        protect = config.deletion_protection
        self.verifications = ReliableTable(
            self,
            "Verifications",
            name="verifications",
            naming=naming,
            removal_policy=keep,
            deletion_protection=protect,
        ).table
        idempotency = idempotency_table(
            self, naming=naming, removal_policy=keep, deletion_protection=protect
        ).table

        self.topic = FanoutTopic(
            self, "ReportEvents", name="report-events", naming=naming, settings=queues, removal_policy=keep
        )
        # A report that is not visible yet is retried with backoff until VERIFY_MAX_AGE_SECONDS (from the
        # event's occurredAt), then recorded UNREACHABLE by the verifier itself: the verifier's retry
        # budget (in time, the kernel's delay chain) must outlast that age, or the kernel would park the
        # message first -- hence retry_budget below. maxReceiveCount now counts only crashes of the
        # function; 12 is kept as before.
        verifier_q = ReliableQueue(
            self,
            "VerifierQueue",
            name="verifier",
            naming=naming,
            settings=queues,
            removal_policy=keep,
            max_receive_count=VERIFIER_MAX_RECEIVE_COUNT,
        )
        notify_q = ReliableQueue(
            self,
            "NotificationQueue",
            name="report-notifications",
            naming=naming,
            settings=queues,
            removal_policy=keep,
        )
        self.topic.subscribe(verifier_q, filter_policy=allowlist_filter(REPORT_GENERATED_FILTER))
        self.topic.subscribe(notify_q, filter_policy=allowlist_filter(REPORT_GENERATED_FILTER))

        verifier = QueueConsumer(
            self,
            "Verifier",
            settings=functions,
            queue=verifier_q,
            handler="reports.handlers.verifier.handler",
            # Each function's environment comes from its declaration in reports/settings.py.
            environment=env.VERIFIER.environment(
                verifications_table=self.verifications.table_name,
                report_api_url=settings.report_api_url,
                verify_max_age_seconds=settings.verify_max_age_seconds,
                http_timeout_seconds=settings.http_timeout_seconds,
            ),
            backoff_base_seconds=VERIFIER_BACKOFF_BASE_SECONDS,
            # One backoff cap (15 min) beyond the maximum age, so the verifier's own verdict comes first.
            retry_budget=Duration.seconds(settings.verify_max_age_seconds + 900),
            description="ReportGenerated → read back from the public API → VERIFIED / MISMATCH / UNREACHABLE",
        )
        self.verifications.grant_read_write_data(verifier.function)

        notifier = QueueConsumer(
            self,
            "Notifier",
            settings=functions,
            queue=notify_q,
            handler="reports.handlers.notifier.handler",
            environment=env.NOTIFIER.environment(
                idempotency_table=idempotency.table_name,
                notify_webhook_url=settings.notify_webhook_url,
                http_timeout_seconds=settings.http_timeout_seconds,
            ),
            description="ReportGenerated → report-ready webhook, once per report",
        )
        idempotency.grant_read_write_data(notifier.function)

        ServiceMonitoring(
            self,
            "Alarms",
            settings=self.monitoring,
            queues=[verifier_q, notify_q],
            topics=[self.topic],
            consumers=[verifier, notifier],
            kernel_metrics=[
                KernelMetric(
                    "VerificationMismatch",
                    label="VerificationMismatches",
                    description="reports: a report read back from the public API does not match its sha256 "
                    "(recorded MISMATCH, not retried). `python -m ops status` for the queues; ask the "
                    "producer to publish the report again.",
                ),
                KernelMetric(
                    "PayloadConflict",
                    label="PayloadConflicts",
                    description="reports: an eventId arrived again with a different payload; it was parked, "
                    "not applied: `python -m ops dlq sample verifier-dlq`.",
                ),
            ],
        )
        CfnOutput(self, "ReportEventsTopicArn", value=self.topic.topic.topic_arn)
        # What `python -m ops smoke` finds the stage by (outputs only: nothing imports them).
        work_queues_output(self, [verifier_q, notify_q])
