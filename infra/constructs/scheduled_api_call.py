"""Scheduled API call: EventBridge Scheduler → the app's event bus → rule → API destination.

Scheduler cannot target an API destination directly, hence the bus hop. Every hop owns its failure
handling, so nothing is silently lost:
- the schedule (cron or rate, time zone, flexible window OFF by default so "minute 0" means minute 0)
  has a retry policy and a DLQ for events it could not put on the bus;
- the rule's API destination target has a retry policy (attempts, maximum event age) and a DLQ whose
  policy admits `events.amazonaws.com` from this rule only (CDK adds the `aws:SourceArn` condition);
- the Connection authenticates with an API key whose value comes from a Secrets Manager secret (never a
  literal in the template);
- retries, rate limit and maximum age default to `defaults.SCHEDULED_CALLS`.
`ServiceMonitoring` alarms on the rule's failed invocations and DLQ deliveries, and on both DLQs
(`dead_letter_queues`). The endpoint must answer within the API destination's 5-second timeout, so it
should only enqueue.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration, RemovalPolicy, SecretValue
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as scheduler_targets
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import QueueSettings
from infra.constructs import defaults
from infra.constructs.naming import Naming
from infra.constructs.reliable_queue import dead_letter_queue

API_KEY_HEADER = "x-api-key"


class ScheduledApiCall(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        naming: Naming,
        event_bus: events.IEventBus,
        queues: QueueSettings,
        removal_policy: RemovalPolicy,
        schedule: scheduler.ScheduleExpression,
        endpoint: str,
        event_source: str,
        detail_type: str,
        detail: dict[str, Any],
        api_key_secret: secretsmanager.ISecret,
        http_method: events.HttpMethod = events.HttpMethod.POST,
        rate_limit_per_second: int = defaults.SCHEDULED_CALLS.rate_limit_per_second,
        schedule_retry_attempts: int = defaults.SCHEDULED_CALLS.schedule_retry_attempts,
        target_retry_attempts: int = defaults.SCHEDULED_CALLS.target_retry_attempts,
        max_event_age: Duration | None = None,
        flexible_window: Duration | None = None,
    ) -> None:
        """`event_bus` is the app's bus (from `core`); `queues` and `removal_policy` are the two DLQs'."""
        super().__init__(scope, construct_id)
        max_event_age = max_event_age or Duration.seconds(defaults.SCHEDULED_CALLS.max_event_age_seconds)
        self.name = name

        def dlq(construct_id: str, dlq_name: str) -> sqs.Queue:
            return dead_letter_queue(
                self,
                construct_id,
                name=dlq_name,
                naming=naming,
                settings=queues,
                removal_policy=removal_policy,
            )

        self.schedule_dlq = dlq("ScheduleDlq", f"{name}-schedule-dlq")
        self.schedule = scheduler.Schedule(
            self,
            "Schedule",
            schedule_name=naming(name),
            schedule=schedule,
            time_window=(
                scheduler.TimeWindow.flexible(flexible_window)
                if flexible_window
                else scheduler.TimeWindow.off()
            ),
            target=scheduler_targets.EventBridgePutEvents(
                scheduler_targets.EventBridgePutEventsEntry(
                    event_bus=event_bus,
                    source=event_source,
                    detail_type=detail_type,
                    detail=scheduler.ScheduleTargetInput.from_object(detail),
                ),
                dead_letter_queue=self.schedule_dlq,
                retry_attempts=schedule_retry_attempts,
                max_event_age=max_event_age,
            ),
        )

        self.connection = events.Connection(
            self,
            "Connection",
            authorization=events.Authorization.api_key(
                API_KEY_HEADER, SecretValue.secrets_manager(api_key_secret.secret_arn)
            ),
            description=f"{name}: API key from {API_KEY_HEADER} secret",
        )
        self.api_destination = events.ApiDestination(
            self,
            "Destination",
            connection=self.connection,
            endpoint=endpoint,
            http_method=http_method,
            rate_limit_per_second=rate_limit_per_second,
        )
        self.target_dlq = dlq("TargetDlq", f"{name}-target-dlq")
        self.event_bus = event_bus
        # Named, so that its alarms can name it as EventBridge's metrics do (the plain rule name).
        self.rule_name = naming(name)
        self.rule = events.Rule(
            self,
            "Rule",
            rule_name=self.rule_name,
            event_bus=event_bus,
            event_pattern=events.EventPattern(source=[event_source], detail_type=[detail_type]),
            targets=[
                targets.ApiDestination(
                    self.api_destination,
                    event=events.RuleTargetInput.from_event_path("$.detail"),
                    dead_letter_queue=self.target_dlq,
                    retry_attempts=target_retry_attempts,
                    max_event_age=max_event_age,
                )
            ],
        )

    @property
    def dead_letter_queues(self) -> dict[str, sqs.IQueue]:
        return {f"{self.name}-schedule-dlq": self.schedule_dlq, f"{self.name}-target-dlq": self.target_dlq}
