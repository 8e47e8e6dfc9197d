"""What a payments function is wired with: settings, AWS clients, the store, the HTTP clients.

Built once per process on first use (not at import, so importing a handler is cheap and tests can
set the environment first) and passed explicitly into the domain functions. Clients are created
lazily: the API never builds an SQS or SNS client. Tests start a fresh one with ``reset_runtime()``
inside ``mock_aws``.
"""

from __future__ import annotations

import functools
from typing import Any

from payments.invoices import InvoiceApiClient
from payments.legacy import LegacyPaymentsClient
from payments.settings import Settings, get_settings
from payments.store import OperationStore
from relay.consumer import ConsumerSettings


def _client(service: str) -> Any:
    import boto3
    from botocore.config import Config

    # Standard retry mode retries throttling and 5xx a few times inside the SDK before the kernel's
    # classification (and the SQS backoff) takes over.
    return boto3.client(
        service,
        config=Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=3, read_timeout=10),
    )


class Runtime:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @functools.cached_property
    def ddb(self) -> Any:
        return _client("dynamodb")

    @functools.cached_property
    def s3(self) -> Any:
        return _client("s3")

    @functools.cached_property
    def sqs(self) -> Any:
        return _client("sqs")

    @functools.cached_property
    def sns(self) -> Any:
        return _client("sns")

    @functools.cached_property
    def store(self) -> OperationStore:
        return OperationStore(
            operations_table=self.settings.require("operations_table"),
            idempotency_table=self.settings.require("idempotency_table"),
            ddb_client=self.ddb,
        )

    @functools.cached_property
    def bucket(self) -> str:
        return self.settings.require("payments_bucket")

    @functools.cached_property
    def legacy(self) -> LegacyPaymentsClient:
        return LegacyPaymentsClient(
            self.settings.require("legacy_payments_url"), timeout_seconds=self.settings.legacy_timeout_seconds
        )

    @functools.cached_property
    def invoices(self) -> InvoiceApiClient:
        return InvoiceApiClient(
            self.settings.require("invoice_api_url"), timeout_seconds=self.settings.legacy_timeout_seconds
        )

    @property
    def consumer_settings(self) -> ConsumerSettings:
        # Read per invocation (a few dict lookups): RELAY_QUEUE_URL / RELAY_DLQ_URL belong to the
        # queue consumer that invokes us, not to the payments settings.
        return ConsumerSettings.from_env()


@functools.cache
def runtime() -> Runtime:
    return Runtime(get_settings())


def reset_runtime() -> None:
    """Forget settings and clients (tests: after changing the environment or starting a new mock)."""
    get_settings.cache_clear()
    runtime.cache_clear()
