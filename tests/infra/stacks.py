"""Small apps that exercise each platform construct, for the infra assertion tests.

The helpers below (`queue`, `consumer`, `topic`, `table`, `scheduled_call`) build a construct the way a
service stack does: with the stack's naming, the stage's settings and removal policy, passed explicitly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_cdk import Acknowledgment, App, Duration, Environment, Validations
from aws_cdk import aws_events as events
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from cdk_nag import AwsSolutionsChecks

from infra.app_builder import build_app
from infra.config import StageConfig, load_stage_config
from infra.constructs.fanout_topic import FanoutTopic
from infra.constructs.monitoring import ServiceMonitoring
from infra.constructs.queue_consumer import QueueConsumer
from infra.constructs.reliable_queue import ReliableQueue
from infra.constructs.scheduled_api_call import ScheduledApiCall
from infra.constructs.tables import ReliableTable, idempotency_table
from infra.stacks.base import Platform, RelayStack
from infra.validation import RelayGuards


def stage_config(**overrides: object) -> StageConfig:
    base = load_stage_config(App()).model_dump()
    base.update(overrides)
    return StageConfig.model_validate(base)


def queue(stack: RelayStack, construct_id: str, **kwargs: Any) -> ReliableQueue:
    return ReliableQueue(
        stack,
        construct_id,
        naming=stack.naming,
        settings=stack.config.queues,
        removal_policy=stack.removal_policy,
        **kwargs,
    )


def consumer(stack: RelayStack, construct_id: str, **kwargs: Any) -> QueueConsumer:
    return QueueConsumer(stack, construct_id, settings=stack.functions, **kwargs)


def topic(stack: RelayStack, construct_id: str, **kwargs: Any) -> FanoutTopic:
    return FanoutTopic(
        stack,
        construct_id,
        naming=stack.naming,
        settings=stack.config.queues,
        removal_policy=stack.removal_policy,
        **kwargs,
    )


def table(stack: RelayStack, construct_id: str, **kwargs: Any) -> ReliableTable:
    return ReliableTable(
        stack,
        construct_id,
        naming=stack.naming,
        removal_policy=stack.removal_policy,
        deletion_protection=stack.config.deletion_protection,
        **kwargs,
    )


def scheduled_call(stack: RelayStack, construct_id: str, **kwargs: Any) -> ScheduledApiCall:
    return ScheduledApiCall(
        stack,
        construct_id,
        naming=stack.naming,
        event_bus=stack.platform.event_bus,
        queues=stack.config.queues,
        removal_policy=stack.removal_policy,
        **kwargs,
    )


def showcase(stack: RelayStack) -> None:
    """One of everything, built the way a service stack would."""
    work = queue(stack, "Work", name="work")
    ordered = queue(stack, "Ordered", name="ordered", fifo=True, content_based_deduplication=True)
    worker = consumer(
        stack, "Worker", queue=work, handler="showcase.worker.handler", timeout=Duration.seconds(20)
    )
    events_topic = topic(stack, "Events", name="events")
    events_topic.subscribe(
        work,
        filter_policy={"eventType": sns.SubscriptionFilter.string_filter(allowlist=["ThingHappened"])},
    )
    audit = queue(stack, "Audit", name="audit")
    events_topic.subscribe(audit, raw_delivery=True)
    secret = secretsmanager.Secret(stack, "ApiKey")
    Validations.of(secret).acknowledge(
        Acknowledgment(id="AwsSolutions::AwsSolutions-SMG4", reason="test fixture secret, never deployed")
    )
    hourly = scheduled_call(
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
    table(stack, "Things", name="things", stream=True)
    idempotency_table(
        stack,
        naming=stack.naming,
        removal_policy=stack.removal_policy,
        deletion_protection=stack.config.deletion_protection,
    )
    ServiceMonitoring(
        stack,
        "Alarms",
        settings=stack.monitoring,
        queues=[work, ordered, audit],
        topics=[events_topic],
        consumers=[worker],
        scheduled_calls=[hourly],
    )


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
    stack.set_platform(
        Platform(
            alarm_topic=sns.Topic(stack, "AlarmTopic"),
            event_bus=events.EventBus(stack, "Bus"),
        )
    )
    stack.use_layers(layer)
    Validations.of(app).add_plugins(RelayGuards())
    body(stack)
    return app


__all__ = [
    "AwsSolutionsChecks",
    "bare",
    "build",
    "consumer",
    "queue",
    "scheduled_call",
    "showcase",
    "stage_config",
    "table",
    "topic",
]
