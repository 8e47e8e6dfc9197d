"""Relay function: a Lambda function with Relay's runtime defaults and its own least-privilege role.

Defaults it owns:
- Python (the version CI tests on: `infra/constructs/layers.py`), arm64, the kernel + dependency layers;
- one code asset per service (`functions/<service>/`, packaged as the `<service>` package);
- its own log group, with the stage's retention, and its own role that may write only to it (instead of
  AWSLambdaBasicExecutionRole);
- timeout, memory and the Powertools service / namespace / log level and sample rate from the stage's
  `consumers` settings (`defaults.CONSUMERS` unless the stage overrides them);
- active tracing (X-Ray): Lambda traces every invocation, and the role may send trace data, which the
  kernel's OpenTelemetry spans need too (X-Ray's OTLP endpoint authorizes them as xray:PutTraceSegments).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Validations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import ConsumerSettings
from infra.constructs.layers import ARCHITECTURE, RUNTIME

ROOT = Path(__file__).resolve().parents[2]

_RETENTION = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
}


def log_retention(days: int) -> logs.RetentionDays:
    """The largest CloudWatch retention step not above `days`."""
    return _RETENTION[max(d for d in _RETENTION if d <= days)]


FUNCTIONS = ROOT / "functions"


def function_code(service: str, code_root: Path = FUNCTIONS) -> lambda_.Code:
    """One code asset per service: `<code_root>/<service>/` (Relay's `functions/<service>/`) is packaged
    as the `<service>` package."""
    return lambda_.Code.from_asset(
        str(code_root),
        exclude=["*", f"!{service}", f"!{service}/**", "**/__pycache__", "**/*.pyc"],
    )


@dataclass(frozen=True)
class FunctionSettings:
    """What every function of one service shares; its stack builds this once and hands it to each."""

    service: str  # code asset `functions/<service>/`, Powertools service name, metric dimension
    stage: str
    metrics_namespace: str
    consumers: ConsumerSettings  # timeout, memory, log retention and level; queue consumers' batching
    layers: Sequence[lambda_.ILayerVersion]  # the kernel and dependency layers from `core`
    removal_policy: RemovalPolicy  # of the log group (and, for an outbox publisher, of its DLQ)
    parked_ledger: dynamodb.ITable | None = None  # the core stack's; queue consumers record parkings there
    code_root: Path = FUNCTIONS  # where `<service>/` is: another app on Relay's constructs keeps its own


class RelayFunction(Construct):
    """`RelayFunction(self, "Api", settings=functions, handler="payments.handlers.api.handler")`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: FunctionSettings,
        handler: str,
        environment: dict[str, str] | None = None,
        timeout: Duration | None = None,
        memory_mb: int | None = None,
        description: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        consumers = settings.consumers
        self.timeout = timeout or Duration.seconds(consumers.timeout_seconds)
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=log_retention(consumers.log_retention_days),
            removal_policy=settings.removal_policy,
        )
        # Its own role instead of AWSLambdaBasicExecutionRole: logs only to its own log group.
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        self.log_group.grant_write(self.role)
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=handler,
            code=function_code(settings.service, settings.code_root),
            layers=list(settings.layers),
            role=self.role,
            log_group=self.log_group,
            timeout=self.timeout,
            memory_size=memory_mb or consumers.memory_mb,
            description=description,
            # Lambda's own segments (init, invocation); the kernel's OpenTelemetry spans (relay.tracing) go to
            # X-Ray's OTLP endpoint with the grant this adds (xray:PutTraceSegments), and link nothing else.
            tracing=lambda_.Tracing.ACTIVE,
            environment={
                "POWERTOOLS_SERVICE_NAME": settings.service,
                "POWERTOOLS_METRICS_NAMESPACE": settings.metrics_namespace,
                "POWERTOOLS_LOG_LEVEL": consumers.log_level,
                "POWERTOOLS_LOGGER_SAMPLE_RATE": f"{consumers.log_sample_rate:g}",
                # relay.tracing's TracerProvider reads both (the OpenTelemetry SDK's own variables).
                "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
                "OTEL_TRACES_SAMPLER_ARG": f"{consumers.trace_sample_rate:g}",
                "RELAY_STAGE": settings.stage,
                **(environment or {}),
            },
        )
        Validations.of(self.function).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-L1",
                reason="Functions run python3.13, the Python the whole test suite runs on (the Makefile "
                "builds .venv with it, and a test fails when the two drift apart); a newer runtime would "
                "deploy code that no test has run.",
            )
        )
        # Active tracing grants the role xray:PutTraceSegments and xray:PutTelemetryRecords on "*".
        Validations.of(self.role).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM5[Resource::*]",
                reason="xray:PutTraceSegments and xray:PutTelemetryRecords (granted for active tracing) do "
                "not support resource-level permissions (AWS service authorization reference); "
                "tests/infra/test_grants.py fails on any action granted on * that does.",
            )
        )
