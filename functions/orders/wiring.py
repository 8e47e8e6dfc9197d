"""What an orders function is wired with: settings, AWS clients, the stores, the webhook client.

Built once per process on first use (``relay.wiring``) and passed explicitly into the domain
functions, which take only the stores or clients they use. Clients are created lazily: the API never
builds an SQS or SNS client.
"""

from __future__ import annotations

import functools

from orders.notification import WHAT
from orders.settings import Settings
from orders.shipping import ShippingApiClient
from orders.store import InventoryStore, OrderStore
from relay.side_effects import OnceWebhook
from relay.wiring import ServiceWiring, Wired


class Wiring(ServiceWiring[Settings]):
    @functools.cached_property
    def orders(self) -> OrderStore:
        return OrderStore(
            orders_table=self.settings.require("orders_table"),
            # The API's (request_key_items); the consumers' steps write no markers.
            idempotency_table=self.settings.idempotency_table,
            ddb_client=self.ddb,
        )

    @functools.cached_property
    def inventory(self) -> InventoryStore:
        return InventoryStore(inventory_table=self.settings.require("inventory_table"), ddb_client=self.ddb)

    @functools.cached_property
    def notification(self) -> OnceWebhook:
        s = self.settings
        return OnceWebhook.of(
            s.require("notify_webhook_url"),
            timeout_seconds=s.http_timeout_seconds,
            what=WHAT,
            idempotency_table=s.require("idempotency_table"),
            ddb_client=self.ddb,
        )

    @functools.cached_property
    def shipping(self) -> ShippingApiClient:
        return ShippingApiClient(
            self.settings.require("shipping_api_url"), timeout_seconds=self.settings.http_timeout_seconds
        )


wiring = Wired(lambda: Wiring(Settings.from_env()))
