"""What a payments function is wired with: settings, AWS clients, the store, the HTTP clients.

Built once per process on first use (not at import, so importing a handler is cheap and tests can
set the environment first) and passed explicitly into the domain functions. Clients are created
lazily: the API never builds an SQS or SNS client. Tests start a fresh one with ``reset_runtime()``
inside ``mock_aws``.
"""

from __future__ import annotations

import functools

from payments.invoices import InvoiceApiClient
from payments.legacy import LegacyPaymentsClient
from payments.settings import Settings, get_settings
from payments.store import OperationStore
from relay.clients import AwsClients
from relay.consumer import ConsumerSettings


class Runtime(AwsClients):
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

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
