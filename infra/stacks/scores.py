"""The `scores` stack: hourly agent score snapshots, timed and delivered by EventBridge.

EventBridge Scheduler (minute 0, time zone, retries, DLQ) → app bus → rule → API destination
(Connection with the API key from Secrets Manager, rate limit, retries, max event age, DLQ)
→ POST /score-snapshots (Lambda authorizer checks the key) → 202 at once, job on the snapshot queue
→ snapshot worker → one snapshot per agent per hour, never two and never a changed one.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Acknowledgment, CfnOutput, Duration, TimeZone, Validations
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_dynamodb as ddb
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct
from scores import settings as env

from infra.config import StageConfig
from infra.constructs.function import RelayFunction
from infra.constructs.monitoring import KernelMetric, ServiceMonitoring
from infra.constructs.outputs import work_queues_output
from infra.constructs.queue_consumer import QueueConsumer
from infra.constructs.reliable_queue import ReliableQueue
from infra.constructs.scheduled_api_call import API_KEY_HEADER, ScheduledApiCall
from infra.constructs.tables import ReliableTable, idempotency_table
from infra.stacks.base import Platform, RelayStack

SNAPSHOT_SOURCE = "relay.scores"
SNAPSHOT_DETAIL_TYPE = "ScoreSnapshotDue"


class ScoresStack(RelayStack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        platform: Platform,
        verifications: ddb.ITable,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, config=config, service="scores", platform=platform, **kwargs)
        settings = config.scores
        naming, keep, functions, queues = self.naming, self.removal_policy, self.functions, config.queues
        protect = config.deletion_protection
        scores = ReliableTable(
            self, "Scores", name="scores", naming=naming, removal_policy=keep, deletion_protection=protect
        ).table
        idempotency = idempotency_table(
            self, naming=naming, removal_policy=keep, deletion_protection=protect
        ).table
        snapshot_q = ReliableQueue(
            self, "SnapshotQueue", name="snapshots", naming=naming, settings=queues, removal_policy=keep
        )

        self.api_key = secretsmanager.Secret(
            self,
            "SnapshotApiKey",
            description="API key EventBridge sends (x-api-key) to POST /score-snapshots",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                exclude_punctuation=True, password_length=48
            ),
        )
        Validations.of(self.api_key).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-SMG4",
                reason="The EventBridge Connection keeps its own copy of this key, taken at deploy time: "
                "automatic rotation would desynchronise it and fail every scheduled call. Rotate by "
                "updating the secret and redeploying (README, 'Rotating the snapshot API key').",
            )
        )

        authorizer_fn = RelayFunction(
            self,
            "Authorizer",
            settings=functions,
            handler="scores.handlers.authorizer.handler",
            # Each function's environment comes from its declaration in scores/settings.py.
            environment=env.AUTHORIZER.environment(api_key_secret_arn=self.api_key.secret_arn),
            timeout=Duration.seconds(5),
            description="API-key Lambda authorizer for POST /score-snapshots",
        )
        self.api_key.grant_read(authorizer_fn.function)
        api_fn = RelayFunction(
            self,
            "Api",
            settings=functions,
            handler="scores.handlers.api.handler",
            environment=env.API.environment(
                scores_table=scores.table_name, snapshot_queue_url=snapshot_q.queue.queue_url
            ),
            timeout=Duration.seconds(5),
            description="POST /score-snapshots (202, enqueue) and GET /agents/{agentId}/scores",
        )
        snapshot_q.queue.grant_send_messages(api_fn.function)
        scores.grant_read_data(api_fn.function)

        api_key_authorizer = authorizers.HttpLambdaAuthorizer(
            "ApiKeyAuthorizer",
            authorizer_fn.function,
            response_types=[authorizers.HttpLambdaResponseType.SIMPLE],
            identity_source=[f"$request.header.{API_KEY_HEADER}"],
            results_cache_ttl=Duration.minutes(1),
        )
        self.http = self.http_api(
            api_fn,
            routes=[(apigw.HttpMethod.GET, "/agents/{agentId}/scores")],
            routes_with_authorizer=[(apigw.HttpMethod.POST, "/score-snapshots", api_key_authorizer)],
        )

        worker = QueueConsumer(
            self,
            "SnapshotWorker",
            settings=functions,
            queue=snapshot_q,
            handler="scores.handlers.snapshot_worker.handler",
            timeout=Duration.seconds(120),
            environment=env.SNAPSHOT_WORKER.environment(
                scores_table=scores.table_name,
                verifications_table=verifications.table_name,
                idempotency_table=idempotency.table_name,
            ),
            description="ScoreSnapshotDue → one snapshot per agent for that hour",
        )
        scores.grant_read_write_data(worker.function)
        verifications.grant_read_data(worker.function)
        idempotency.grant_read_write_data(worker.function)

        endpoint = settings.snapshot_endpoint or f"{self.http.url}/score-snapshots"
        self.schedule = ScheduledApiCall(
            self,
            "HourlySnapshot",
            name="hourly-snapshot",
            naming=naming,
            event_bus=platform.event_bus,
            queues=queues,
            removal_policy=keep,
            schedule=scheduler.ScheduleExpression.cron(
                minute="0", hour="*", time_zone=TimeZone.of(settings.timezone)
            ),
            endpoint=endpoint,
            event_source=SNAPSHOT_SOURCE,
            detail_type=SNAPSHOT_DETAIL_TYPE,
            detail={"snapshotHour": scheduler.ContextAttribute.scheduled_time},
            api_key_secret=self.api_key,
            rate_limit_per_second=settings.rate_limit_per_second,
            schedule_retry_attempts=settings.schedule_retry_attempts,
            target_retry_attempts=settings.target_retry_attempts,
            max_event_age=Duration.seconds(settings.max_event_age_seconds),
        )
        ServiceMonitoring(
            self,
            "Alarms",
            settings=self.monitoring,
            queues=[snapshot_q],
            consumers=[worker],
            scheduled_calls=[self.schedule],
            kernel_metrics=[
                KernelMetric(
                    "PayloadConflict",
                    label="PayloadConflicts",
                    description="scores: an eventId arrived again with a different payload; it was parked, "
                    "not applied: `python -m ops dlq sample snapshots-dlq`.",
                )
            ],
        )
        CfnOutput(self, "ScoresApiUrl", value=self.http.url)
        # What `python -m ops smoke` finds the stage by (outputs only: nothing imports them).
        work_queues_output(self, [snapshot_q])
        CfnOutput(
            self,
            "HourlyScheduleName",
            value=self.schedule.schedule.schedule_name,
            description="The hourly snapshot schedule (EventBridge Scheduler, default group)",
        )
