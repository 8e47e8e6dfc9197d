"""The orders functions' configuration: read from the environment once, validated.

Each function gets only the variables its own work needs (the notifier has no orders table, the
analytics writer only its bucket), so everything not every function needs is optional here and asked
for with ``settings.require("...")``, which names the missing variable instead of failing with a
KeyError somewhere deep in a call.
"""

from __future__ import annotations

import functools
from typing import ClassVar

from pydantic import Field, field_validator

from relay.settings import FunctionSettings, http_url

# One DynamoDB transaction holds at most 100 items. Reserving an order writes the processed-event
# marker, the order, the reservation record and one item per SKU (and a rejection an outbox row):
# 100 - 4 = 96 SKUs at most.
TRANSACTION_ITEM_LIMIT = 100
MAX_SKUS_PER_TRANSACTION = TRANSACTION_ITEM_LIMIT - 4
# Lines per order: the OpenAPI document's maxItems, so one number for every stage (a per-stage limit
# would reject orders the checked-in document accepts). Well inside one reservation transaction.
MAX_ORDER_ITEMS = 25

_ENV_NAMES = {
    "orders_table": "ORDERS_TABLE",
    "inventory_table": "INVENTORY_TABLE",
    "idempotency_table": "IDEMPOTENCY_TABLE",
    "events_topic_arn": "EVENTS_TOPIC_ARN",
    "notify_webhook_url": "NOTIFY_WEBHOOK_URL",
    "http_timeout_seconds": "HTTP_TIMEOUT_SECONDS",
    "analytics_bucket": "ANALYTICS_BUCKET",
}


class Settings(FunctionSettings):
    SERVICE: ClassVar[str] = "orders"
    ENV_NAMES: ClassVar[dict[str, str]] = _ENV_NAMES

    orders_table: str | None = None
    inventory_table: str | None = None
    idempotency_table: str | None = None
    events_topic_arn: str | None = None
    notify_webhook_url: str | None = None
    http_timeout_seconds: float = Field(5.0, gt=0, le=60)
    analytics_bucket: str | None = None
    # How long a client's Idempotency-Key stays bound to the order it created.
    request_key_ttl_days: int = Field(7, gt=0)

    @field_validator("notify_webhook_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return http_url(value, example="https://notify.example.com/orders", strip_slash=False)


@functools.cache
def get_settings() -> Settings:
    """The settings of this process, read on first use (tests call ``runtime.reset_runtime()``)."""
    return Settings.from_env()
