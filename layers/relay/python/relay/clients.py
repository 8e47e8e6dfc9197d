"""AWS clients for a function's wiring, created lazily (importing a handler stays cheap, and tests
can set the environment and start ``mock_aws`` first).

Standard retry mode retries throttling and 5xx a few times inside the SDK before the kernel's
classification (and the SQS backoff) takes over. ``fast=True`` is for code that answers a caller with
a short deadline (an API Destination gives up after 5 s, an authorizer runs inside API Gateway's
timeout): fail fast rather than let the SDK's retries outlast the caller.

This is the kernel's one client factory: a wiring's clients (``AwsClients``) and the clients the kernel
falls back on when a caller passes none (``default_client``) are all built by ``aws_client``.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Literal, overload

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_secretsmanager import SecretsManagerClient
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_sqs import SQSClient


@overload
def aws_client(service: Literal["dynamodb"], *, fast: bool = False) -> DynamoDBClient: ...
@overload
def aws_client(service: Literal["s3"], *, fast: bool = False) -> S3Client: ...
@overload
def aws_client(service: Literal["sqs"], *, fast: bool = False) -> SQSClient: ...
@overload
def aws_client(service: Literal["sns"], *, fast: bool = False) -> SNSClient: ...
@overload
def aws_client(service: Literal["secretsmanager"], *, fast: bool = False) -> SecretsManagerClient: ...
@overload
def aws_client(service: Literal["events"], *, fast: bool = False) -> EventBridgeClient: ...
def aws_client(service: str, *, fast: bool = False) -> Any:
    import boto3
    from botocore.config import Config

    if fast:
        config = Config(retries={"mode": "standard", "max_attempts": 2}, connect_timeout=1, read_timeout=2)
    else:
        config = Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=3, read_timeout=10)
    return boto3.client(service, config=config)  # type: ignore[call-overload]


@functools.cache
def _default(service: str) -> Any:
    return aws_client(service)  # type: ignore[call-overload]  # the service is a parameter


@overload
def default_client(service: Literal["dynamodb"]) -> DynamoDBClient: ...
@overload
def default_client(service: Literal["s3"]) -> S3Client: ...
@overload
def default_client(service: Literal["sqs"]) -> SQSClient: ...
@overload
def default_client(service: Literal["sns"]) -> SNSClient: ...
@overload
def default_client(service: Literal["events"]) -> EventBridgeClient: ...
def default_client(service: str) -> Any:
    """The process's one client of ``service`` for kernel code a caller passed no client to (``consume``
    without ``sqs_client``, ``commit_once`` without ``ddb_client``, ...): built by ``aws_client`` at
    first use, kept for the execution environment, forgotten by ``relay.wiring.reset_all``."""
    return _default(service)


def forget_default_clients() -> None:
    """The next ``default_client`` builds anew (tests: a new environment or a new ``mock_aws``)."""
    _default.cache_clear()


class AwsClients:
    """Lazily created, per-process clients; a service's wiring subclasses it."""

    @functools.cached_property
    def ddb(self) -> DynamoDBClient:
        return aws_client(
            "dynamodb",
        )

    @functools.cached_property
    def s3(self) -> S3Client:
        return aws_client(
            "s3",
        )

    @functools.cached_property
    def sqs(self) -> SQSClient:
        return aws_client(
            "sqs",
        )

    @functools.cached_property
    def sns(self) -> SNSClient:
        return aws_client(
            "sns",
        )

    @functools.cached_property
    def events(self) -> EventBridgeClient:
        return aws_client("events")
