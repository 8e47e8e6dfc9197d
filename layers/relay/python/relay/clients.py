"""AWS clients for a function's runtime, created lazily (importing a handler stays cheap, and tests
can set the environment and start ``mock_aws`` first).

Standard retry mode retries throttling and 5xx a few times inside the SDK before the kernel's
classification (and the SQS backoff) takes over. ``fast=True`` is for code that answers a caller with
a short deadline (an API Destination gives up after 5 s): fail fast rather than let the SDK's retries
outlast the caller.
"""

from __future__ import annotations

import functools
from typing import Any


def aws_client(service: str, *, fast: bool = False) -> Any:
    import boto3
    from botocore.config import Config

    if fast:
        config = Config(retries={"mode": "standard", "max_attempts": 2}, connect_timeout=1, read_timeout=2)
    else:
        config = Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=3, read_timeout=10)
    return boto3.client(service, config=config)


class AwsClients:
    """Lazily created, per-process clients; a service's ``Runtime`` subclasses it."""

    @functools.cached_property
    def ddb(self) -> Any:
        return aws_client("dynamodb")

    @functools.cached_property
    def s3(self) -> Any:
        return aws_client("s3")

    @functools.cached_property
    def sqs(self) -> Any:
        return aws_client("sqs")

    @functools.cached_property
    def sns(self) -> Any:
        return aws_client("sns")
