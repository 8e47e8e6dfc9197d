"""What every Relay stack holds: the validated stage config, its service's naming and removal policy, its
own copy of the two Lambda layers, and (for service stacks) the platform pieces from `core`. A stack hands
these to each construct it builds, as explicit arguments: constructs never look them up.

Why each stack builds its own layers instead of importing core's: a LayerVersion is replaced whenever its
content changes, so its ARN changes with every kernel or dependency change. Exported from core and
imported by the service stacks, that ARN is an export CloudFormation refuses to update while it is in use
("Cannot update export ... as it is in use by ..."): the second deploy after any code change would fail.
Built in the stack whose functions use it, the layer is replaced and the functions updated in the same
stack update (and rolled back together). The layers' assets are shared: the same content has the same
asset hash, so it is uploaded once. The platform pieces `core` does export (the alarm topic, the bus, the
parked ledger) keep their ARNs across code changes; `infra.guards` (RELAY-EXPORT-REPLACED) refuses an
export of anything CloudFormation replaces on a content change."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.function import FUNCTIONS, FunctionSettings, RelayFunction
from infra.constructs.http_api import HttpApi
from infra.constructs.layers import dependency_layer, kernel_layer
from infra.constructs.monitoring import MonitoringSettings
from infra.constructs.naming import Naming


@dataclass(frozen=True)
class Platform:
    """The shared pieces the `core` stack owns and every service stack uses."""

    alarm_topic: sns.ITopic
    event_bus: events.IEventBus
    # Every queue consumer records its parkings here (relay.ledger); `python -m ops` reads it.
    parked_ledger: dynamodb.ITable | None = None


def removal_policy(config: StageConfig) -> RemovalPolicy:
    """What `cdk destroy` does to DLQs, buckets, log groups, tables and the KMS key (`disposable`)."""
    return RemovalPolicy.DESTROY if config.disposable else RemovalPolicy.RETAIN


class RelayStack(Stack):
    """Base class of every Relay stack."""

    # Where the services' code is (`<code_root>/<service>/`): Relay's `functions/`; an app built on
    # Relay's constructs outside this repository sets its own (examples/your-first-flow).
    code_root: Path = FUNCTIONS

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
        self._layers: tuple[lambda_.ILayerVersion, ...] | None = None

    @property
    def platform(self) -> Platform:
        if self._platform is None:
            raise RuntimeError(f"stack {self.stack_name} was built without the core platform")
        return self._platform

    def set_platform(self, platform: Platform) -> None:
        self._platform = platform

    @property
    def layers(self) -> tuple[lambda_.ILayerVersion, ...]:
        """This stack's own dependency and kernel layers (module docstring: why not core's), built on
        first use, so a stack without functions has none."""
        if self._layers is None:
            self._layers = (dependency_layer(self), kernel_layer(self))
        return self._layers

    def use_layers(self, *layers: lambda_.ILayerVersion) -> None:
        """Stand-in layers instead of building them (tests that only check synth-time rules)."""
        self._layers = layers

    @property
    def functions(self) -> FunctionSettings:
        """What every function of this service gets: the runtime settings, the layers, the log policy."""
        return FunctionSettings(
            service=self.service,
            stage=self.config.stage,
            metrics_namespace=self.config.metrics_namespace,
            consumers=self.config.consumers,
            layers=self.layers,
            removal_policy=self.removal_policy,
            parked_ledger=self.platform.parked_ledger,
            code_root=self.code_root,
        )

    def http_api(
        self,
        handler: RelayFunction,
        *,
        routes: Sequence[tuple[apigw.HttpMethod, str]],
        routes_with_authorizer: Sequence[tuple[apigw.HttpMethod, str, apigw.IHttpRouteAuthorizer]] = (),
    ) -> HttpApi:
        """The service's HTTP API (`<service>-api`, construct id `Http`): its routes on ``handler``, with
        the stage's throttle, access-log retention and removal policy."""
        return HttpApi(
            self,
            "Http",
            name=f"{self.service}-api",
            naming=self.naming,
            log_retention_days=self.config.consumers.log_retention_days,
            throttle_rate=self.config.http_api.throttle_rate,
            throttle_burst=self.config.http_api.throttle_burst,
            removal_policy=self.removal_policy,
            handler=handler,
            routes=routes,
            routes_with_authorizer=routes_with_authorizer,
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
