"""What every Relay stack holds: the validated stage config, its service's naming and removal policy, and
(for service stacks) the platform pieces from `core`. A stack hands these to each construct it builds, as
explicit arguments: constructs never look them up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.function import FunctionSettings
from infra.constructs.monitoring import MonitoringSettings
from infra.constructs.naming import Naming


@dataclass(frozen=True)
class Platform:
    """The shared pieces the `core` stack owns and every service stack uses."""

    alarm_topic: sns.ITopic
    event_bus: events.IEventBus
    kernel_layer: lambda_.ILayerVersion
    dependency_layer: lambda_.ILayerVersion
    # Every queue consumer records its parkings here (relay.ledger); `python -m ops` reads it.
    parked_ledger: dynamodb.ITable | None = None

    @property
    def layers(self) -> list[lambda_.ILayerVersion]:
        return [self.dependency_layer, self.kernel_layer]


def removal_policy(config: StageConfig) -> RemovalPolicy:
    """What `cdk destroy` does to DLQs, buckets, log groups, tables and the KMS key (`disposable`)."""
    return RemovalPolicy.DESTROY if config.disposable else RemovalPolicy.RETAIN


class RelayStack(Stack):
    """Base class of every Relay stack."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        service: str,
        platform: Platform | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        self.service = service
        self.naming = Naming(prefix=config.prefix, service=service)
        self.removal_policy = removal_policy(config)
        self._platform = platform

    @property
    def platform(self) -> Platform:
        if self._platform is None:
            raise RuntimeError(f"stack {self.stack_name} was built without the core platform")
        return self._platform

    def set_platform(self, platform: Platform) -> None:
        self._platform = platform

    @property
    def functions(self) -> FunctionSettings:
        """What every function of this service gets: the runtime settings, the layers, the log policy."""
        return FunctionSettings(
            service=self.service,
            stage=self.config.stage,
            metrics_namespace=self.config.metrics_namespace,
            consumers=self.config.consumers,
            layers=tuple(self.platform.layers),
            removal_policy=self.removal_policy,
            parked_ledger=self.platform.parked_ledger,
        )

    @property
    def monitoring(self) -> MonitoringSettings:
        """What this stack's `ServiceMonitoring` needs besides the resources it watches."""
        return MonitoringSettings(
            alarm_topic=self.platform.alarm_topic,
            dashboard_name=self.naming("dashboard"),
            service=self.service,
            metrics_namespace=self.config.metrics_namespace,
            oldest_message_alarm_seconds=self.config.queues.oldest_message_alarm_seconds,
        )
