"""The orders functions' configuration: read from the environment once, validated.

Each function gets only the variables its own work needs (the notifier has no orders table, the
analytics writer only its bucket), so everything not every function needs is optional here and asked
for with ``settings.require("...")``, which names the missing variable instead of failing with a
KeyError somewhere deep in a call.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

# One DynamoDB transaction holds at most 100 items. Reserving an order writes the processed-event
# marker, the order, the reservation record and one item per SKU (and a rejection an outbox row):
# 100 - 4 = 96 SKUs at most, whatever MAX_ORDER_ITEMS says.
TRANSACTION_ITEM_LIMIT = 100
MAX_SKUS_PER_TRANSACTION = TRANSACTION_ITEM_LIMIT - 4

_ENV_NAMES = {
    "orders_table": "ORDERS_TABLE",
    "inventory_table": "INVENTORY_TABLE",
    "idempotency_table": "IDEMPOTENCY_TABLE",
    "events_topic_arn": "EVENTS_TOPIC_ARN",
    "notify_webhook_url": "NOTIFY_WEBHOOK_URL",
    "http_timeout_seconds": "HTTP_TIMEOUT_SECONDS",
    "analytics_bucket": "ANALYTICS_BUCKET",
    "max_order_items": "MAX_ORDER_ITEMS",
}


class SettingsError(RuntimeError):
    """The function's environment is incomplete or invalid: a deployment problem, not a message problem."""


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    orders_table: str | None = None
    inventory_table: str | None = None
    idempotency_table: str | None = None
    events_topic_arn: str | None = None
    notify_webhook_url: str | None = None
    http_timeout_seconds: float = Field(5.0, gt=0, le=60)
    analytics_bucket: str | None = None
    max_order_items: int = Field(25, ge=1, le=MAX_SKUS_PER_TRANSACTION)
    # How long a client's Idempotency-Key stays bound to the order it created.
    request_key_ttl_days: int = Field(7, gt=0)

    @field_validator("notify_webhook_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("https://", "http://")):
            raise ValueError("must be an http(s) URL, e.g. https://notify.example.com/orders")
        return value

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field, name in _ENV_NAMES.items():
            raw = env.get(name)
            if raw is not None and raw.strip() != "":
                values[field] = raw.strip()
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problems = "; ".join(
                f"{_ENV_NAMES.get(str(err['loc'][0]), err['loc'][0]) if err['loc'] else '?'}: {err['msg']}"
                for err in exc.errors()
            )
            raise SettingsError(f"invalid orders configuration: {problems}") from None

    def require(self, field: str) -> str:
        """The value of an optional setting this function cannot work without."""
        value = getattr(self, field)
        if not value:
            raise SettingsError(
                f"environment variable {_ENV_NAMES[field]} is not set; this function needs it "
                "(the orders stack sets it -- check the function's configuration)."
            )
        return str(value)


@functools.cache
def get_settings() -> Settings:
    """The settings of this process, read on first use (tests call ``runtime.reset_runtime()``)."""
    return Settings.from_env()
