"""What every Relay stack shares: the validated stage config, the platform pieces from `core`, and one
alarm/dashboard hub per stack. Constructs reach these through `RelayStack.of(self)` so a stack never has to
thread them through by hand (and cannot forget to)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aws_cdk import Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from constructs import Construct, IConstruct

from infra.config import StageConfig

if TYPE_CHECKING:
    from infra.constructs.alarms import ServiceAlarms


@dataclass(frozen=True)
class Platform:
    """The shared pieces the `core` stack owns and every service stack uses."""

    alarm_topic: sns.ITopic
    event_bus: events.IEventBus
    kernel_layer: lambda_.ILayerVersion
    dependency_layer: lambda_.ILayerVersion

    @property
    def layers(self) -> list[lambda_.ILayerVersion]:
        return [self.dependency_layer, self.kernel_layer]


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
        self._platform = platform
        self._alarms: ServiceAlarms | None = None

    @staticmethod
    def of(scope: IConstruct) -> RelayStack:
        stack = Stack.of(scope)
        if not isinstance(stack, RelayStack):
            raise TypeError(
                f"{scope.node.path}: Relay constructs must live in a RelayStack, not {type(stack)}"
            )
        return stack

    @property
    def platform(self) -> Platform:
        if self._platform is None:
            raise RuntimeError(f"stack {self.stack_name} was built without the core platform")
        return self._platform

    def set_platform(self, platform: Platform) -> None:
        self._platform = platform

    @property
    def alarms(self) -> ServiceAlarms:
        if self._alarms is None:
            from infra.constructs.alarms import ServiceAlarms

            self._alarms = ServiceAlarms(self, "Alarms", topic=self.platform.alarm_topic)
        return self._alarms

    def physical_name(self, name: str) -> str:
        return f"{self.config.prefix}-{self.service}-{name}"
