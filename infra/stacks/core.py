"""The `core` stack: what every service stack stands on — the app's event bus, the alarm topic and the
parked ledger. It holds no Lambda layers: each service stack builds its own (infra/stacks/base.py says
why: a layer ARN changes with the code, and an export that changes fails the update).

The alarm key follows the stage's removal policy: retained in prod, because a deleted key makes what it
encrypted unreadable for good; deleting it is a deliberate `aws kms schedule-key-deletion`.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from constructs import Construct

from infra.config import StageConfig
from infra.constructs import defaults
from infra.constructs.tables import ReliableTable
from infra.stacks.base import Platform, RelayStack
from relay.ledger import ENTITY_INDEX


class CoreStack(RelayStack):
    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, config=config, service="core", **kwargs)

        # CloudWatch alarms can publish only to topics encrypted with a customer-managed key whose policy
        # lets cloudwatch.amazonaws.com use it; with `aws/sns` every alarm notification would be dropped.
        key = kms.Key(
            self,
            "AlarmKey",
            alias=f"alias/{config.prefix}-alarms",
            enable_key_rotation=True,
            pending_window=Duration.days(defaults.KEYS.pending_window_days),
            removal_policy=self.removal_policy,
            description="Encrypts the Relay alarm topic; usable by CloudWatch alarms",
        )
        key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
                conditions={"StringEquals": {"aws:SourceAccount": self.account}},
            )
        )
        alarm_topic = sns.Topic(
            self, "AlarmTopic", topic_name=self.naming("alarms"), master_key=key, enforce_ssl=True
        )
        alarm_topic.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[alarm_topic.topic_arn],
                conditions={"StringEquals": {"aws:SourceAccount": self.account}},
            )
        )
        if config.alarm_email:
            alarm_topic.add_subscription(subs.EmailSubscription(config.alarm_email))

        self.event_bus = events.EventBus(self, "EventBus", event_bus_name=config.prefix)
        # The parked ledger (relay.ledger): one item per parked message, by queue and by entity.
        ledger = ReliableTable(
            self,
            "ParkedLedger",
            name="parked-ledger",
            naming=self.naming,
            removal_policy=self.removal_policy,
            deletion_protection=config.deletion_protection,
        ).table
        ledger.add_global_secondary_index(
            index_name=ENTITY_INDEX,
            partition_key=dynamodb.Attribute(name="entity", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="parkedAt", type=dynamodb.AttributeType.STRING),
            projection_type=dynamodb.ProjectionType.ALL,
        )
        self.parked_ledger = ledger
        self.set_platform(
            Platform(
                alarm_topic=alarm_topic,
                event_bus=self.event_bus,
                parked_ledger=ledger,
            )
        )
