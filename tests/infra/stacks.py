"""Small apps that exercise each platform construct, for the infra assertion tests."""

from __future__ import annotations

from collections.abc import Callable

from aws_cdk import Acknowledgment, App, Duration, Environment, Validations
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from cdk_nag import AwsSolutionsChecks

from infra.app_builder import build_app
from infra.config import StageConfig, load_stage_config
from infra.constructs.base import Platform, RelayStack
from infra.constructs.fanout_topic import FanoutTopic
from infra.constructs.queue_consumer import QueueConsumer
from infra.constructs.reliable_queue import ReliableQueue
from infra.constructs.scheduled_api_call import ScheduledApiCall
from infra.constructs.tables import ReliableTable, idempotency_table
from infra.validation import RelayGuards


def stage_config(**overrides: object) -> StageConfig:
    base = load_stage_config(App()).model_dump()
    base.update(overrides)
    return StageConfig.model_validate(base)


def showcase(stack: RelayStack) -> None:
    """One of everything, built the way a service stack would."""
    work = ReliableQueue(stack, "Work", name="work")
    ReliableQueue(stack, "Ordered", name="ordered", fifo=True, content_based_deduplication=True)
    QueueConsumer(
        stack, "Worker", queue=work, handler="showcase.worker.handler", timeout=Duration.seconds(20)
    )
    topic = FanoutTopic(stack, "Events", name="events")
    topic.subscribe(
        work,
        filter_policy={"eventType": sns.SubscriptionFilter.string_filter(allowlist=["ThingHappened"])},
    )
    audit = ReliableQueue(stack, "Audit", name="audit")
    topic.subscribe(audit, raw_delivery=True)
    secret = secretsmanager.Secret(stack, "ApiKey")
    Validations.of(secret).acknowledge(
        Acknowledgment(id="AwsSolutions::AwsSolutions-SMG4", reason="test fixture secret, never deployed")
    )
    ScheduledApiCall(
        stack,
        "Hourly",
        name="hourly",
        schedule=scheduler.ScheduleExpression.cron(minute="0", hour="*"),
        endpoint="https://example.com/score-snapshots",
        event_source="relay.test",
        detail_type="ScoreSnapshotDue",
        detail={"snapshotHour": "<aws.scheduler.scheduled-time>"},
        api_key_secret=secret,
    )
    ReliableTable(stack, "Things", name="things", stream=True)
    idempotency_table(stack)


def build(
    body: Callable[[RelayStack], None],
    *,
    config: StageConfig | None = None,
    nag: bool = False,
) -> tuple[App, RelayStack]:
    """An app with the real core stack (layers, bus, alarm topic) and one service stack `body` fills."""
    app = App(context={"aws:cdk:enable-path-metadata": True})
    config = config or stage_config()
    stacks = build_app(app, config, nag=nag)
    stack = RelayStack(
        app,
        "svc",
        config=config,
        service="svc",
        platform=stacks["core"].platform,
        env=Environment(account=config.account, region=config.region),
    )
    body(stack)
    return app, stack


def bare(body: Callable[[RelayStack], None], *, config: StageConfig | None = None) -> App:
    """Only the guards, and stand-in layers: fast, for tests that expect synth to fail."""
    app = App(context={"aws:cdk:enable-path-metadata": True})
    config = config or stage_config()
    stack = RelayStack(app, "svc", config=config, service="svc")
    layer = lambda_.LayerVersion.from_layer_version_arn(
        stack, "Layer", "arn:aws:lambda:us-east-1:123456789012:layer:stand-in:1"
    )
    from aws_cdk import aws_events as events

    stack.set_platform(
        Platform(
            alarm_topic=sns.Topic(stack, "AlarmTopic"),
            event_bus=events.EventBus(stack, "Bus"),
            kernel_layer=layer,
            dependency_layer=layer,
        )
    )
    Validations.of(app).add_plugins(RelayGuards())
    body(stack)
    return app


__all__ = ["AwsSolutionsChecks", "bare", "build", "showcase", "stage_config"]
