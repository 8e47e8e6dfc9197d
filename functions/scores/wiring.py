"""What a scores function is wired with: settings, AWS clients, the stores, the API key.

Built once per process on first use (``relay.wiring``) and passed explicitly into the domain
functions. The API and the authorizer answer callers with short deadlines (an API Destination gives
up after 5 seconds): their clients fail fast (503 or 500, which the caller retries) rather than let
the SDK's retries outlast the caller; the snapshot worker's clients are the standard ones.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from relay.clients import aws_client
from relay.wiring import ServiceWiring, Wired
from scores.api_key import ApiKey
from scores.settings import Settings
from scores.store import ScoresStore

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient


class Wiring(ServiceWiring[Settings]):
    @functools.cached_property
    def api_ddb(self) -> DynamoDBClient:
        return aws_client("dynamodb", fast=True)

    @functools.cached_property
    def api_sqs(self) -> SQSClient:
        return aws_client("sqs", fast=True)

    @functools.cached_property
    def api_store(self) -> ScoresStore:
        return ScoresStore(ddb_client=self.api_ddb, scores_table=self.settings.require("scores_table"))

    @functools.cached_property
    def worker_store(self) -> ScoresStore:
        return ScoresStore(
            ddb_client=self.ddb,
            scores_table=self.settings.require("scores_table"),
            verifications_table=self.settings.require("verifications_table"),
            idempotency_table=self.settings.require("idempotency_table"),
        )

    @functools.cached_property
    def api_key(self) -> ApiKey:
        return ApiKey(
            self.settings.require("api_key_secret_arn"),
            secrets_client=aws_client("secretsmanager", fast=True),
            refresh_seconds=self.settings.api_key_refresh_seconds,
        )


wiring = Wired(lambda: Wiring(Settings.from_env()))
