"""The orders functions' settings and, per function, the ones it needs (``relay.settings``: the stack
and the function read the same declaration); the webhook URL comes from the stage config.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, field_validator

from relay.settings import FunctionEnvironment, OutboxSettings, http_url

# Lines per order: the OpenAPI document's maxItems, so one number for every stage (a per-stage limit
# would reject orders the checked-in document accepts). Well inside one reservation transaction.
MAX_ORDER_ITEMS = 25


class Settings(OutboxSettings):
    SERVICE: ClassVar[str] = "orders"

    orders_table: str | None = None
    inventory_table: str | None = None
    notify_webhook_url: str | None = None
    http_timeout_seconds: float = Field(5.0, gt=0, le=60)
    # The app's EventBridge bus (core stack): the outbox publisher puts the integration events there.
    event_bus_name: str | None = None
    # The external shipping API (its base URL comes from the stage config).
    shipping_api_url: str | None = None
    # A stage upgraded from the layout with request-key items: the API looks a key up there first, so a
    # retry of an order placed before the upgrade is answered, not placed twice.
    request_key_items: bool = False

    @field_validator("notify_webhook_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return http_url(value, example="https://notify.example.com/orders", strip_slash=False)

    @field_validator("shipping_api_url")
    @classmethod
    def _shipping_url(cls, value: str | None) -> str | None:
        return http_url(value, example="https://shipping.example.com")


# What each function needs (the stack sets exactly these; the function checks them at cold start).
API = FunctionEnvironment(
    Settings, "api", required=("orders_table", "idempotency_table"), optional=("request_key_items",)
)
OUTBOX_PUBLISHER = FunctionEnvironment(
    Settings, "outbox-publisher", required=("orders_table", "events_topic_arn", "event_bus_name")
)
INVENTORY = FunctionEnvironment(Settings, "inventory", required=("orders_table", "inventory_table"))
NOTIFIER = FunctionEnvironment(
    Settings,
    "notifier",
    required=("idempotency_table", "notify_webhook_url"),
    optional=("http_timeout_seconds",),
)
FAILED_PAYMENTS = FunctionEnvironment(Settings, "failed-payments", required=("orders_table",))
PAID_ORDERS = FunctionEnvironment(Settings, "paid-orders", required=("orders_table",))
SHIPPING = FunctionEnvironment(
    Settings,
    "shipping",
    required=("orders_table", "shipping_api_url"),
    optional=("http_timeout_seconds",),
)
