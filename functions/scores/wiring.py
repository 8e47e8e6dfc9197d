"""What a scores function is wired with: settings, AWS clients, the store.

Built once per process on first use and passed explicitly into the domain functions. Tests start a
fresh one with ``reset_runtime()`` inside ``mock_aws``.
"""

from __future__ import annotations

import functools
from typing import Any

from relay.clients import aws_client
from relay.consumer import ConsumerSettings
from scores.settings import Settings, get_settings
from scores.store import ScoresStore


class Runtime:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    # The API answers an API Destination that gives up after 5 seconds: its clients fail fast (503,
    # which EventBridge retries) rather than let the SDK's retries outlast the caller.
    @functools.cached_property
    def ddb(self) -> Any:
        return aws_client("dynamodb", fast=True)

    @functools.cached_property
    def worker_ddb(self) -> Any:
        return aws_client("dynamodb")

    @functools.cached_property
    def sqs(self) -> Any:
        return aws_client("sqs", fast=True)

    @functools.cached_property
    def consumer_sqs(self) -> Any:
        return aws_client("sqs")

    @functools.cached_property
    def api_store(self) -> ScoresStore:
        return ScoresStore(ddb_client=self.ddb, scores_table=self.settings.require("scores_table"))

    @functools.cached_property
    def worker_store(self) -> ScoresStore:
        return ScoresStore(
            ddb_client=self.worker_ddb,
            scores_table=self.settings.require("scores_table"),
            verifications_table=self.settings.require("verifications_table"),
            idempotency_table=self.settings.require("idempotency_table"),
        )

    @property
    def consumer_settings(self) -> ConsumerSettings:
        return ConsumerSettings.from_env()


@functools.cache
def runtime() -> Runtime:
    return Runtime(get_settings())


def reset_runtime() -> None:
    """Forget settings, clients and the cached API key (tests: after changing the environment)."""
    get_settings.cache_clear()
    runtime.cache_clear()
    from scores import authorizer

    authorizer.reset_api_key()
