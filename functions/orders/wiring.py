"""What an orders function is wired with: settings, AWS clients, the stores, the webhook client.

Built once per process on first use (not at import, so importing a handler is cheap and tests can
set the environment first) and passed explicitly into the domain functions. Clients are created
lazily: the API never builds an SQS, SNS or S3 client. Tests start a fresh one with
``reset_runtime()`` inside ``mock_aws``.
"""

from __future__ import annotations

import functools

from orders.notification import WHAT, NotificationDeps
from orders.settings import Settings, get_settings
from orders.store import InventoryStore, OrderStore
from relay.clients import AwsClients
from relay.consumer import ConsumerSettings
from relay.http import WebhookClient


class Runtime(AwsClients):
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @functools.cached_property
    def orders(self) -> OrderStore:
        return OrderStore(
            orders_table=self.settings.require("orders_table"),
            idempotency_table=self.settings.require("idempotency_table"),
            ddb_client=self.ddb,
        )

    @functools.cached_property
    def inventory(self) -> InventoryStore:
        return InventoryStore(inventory_table=self.settings.require("inventory_table"), ddb_client=self.ddb)

    @functools.cached_property
    def notification(self) -> NotificationDeps:
        s = self.settings
        return NotificationDeps(
            webhook=WebhookClient(
                s.require("notify_webhook_url"), timeout_seconds=s.http_timeout_seconds, what=WHAT
            ),
            idempotency_table=s.require("idempotency_table"),
            ddb_client=self.ddb,
        )

    @functools.cached_property
    def analytics_bucket(self) -> str:
        return self.settings.require("analytics_bucket")

    @property
    def consumer_settings(self) -> ConsumerSettings:
        # Read per invocation (a few dict lookups): RELAY_QUEUE_URL / RELAY_DLQ_URL belong to the
        # queue consumer that invokes us, not to the orders settings.
        return ConsumerSettings.from_env()


@functools.cache
def runtime() -> Runtime:
    return Runtime(get_settings())


def reset_runtime() -> None:
    """Forget settings and clients (tests: after changing the environment or starting a new mock)."""
    get_settings.cache_clear()
    runtime.cache_clear()
