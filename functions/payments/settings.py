"""The payments functions' configuration: read from the environment once, validated.

Each function gets only the variables its own work needs (the API has no legacy URL, the payment
worker no topic), so everything that not every function needs is optional here and asked for with
``settings.require("...")``, which fails with a message naming the variable instead of a KeyError
somewhere deep in a call.
"""

from __future__ import annotations

import functools
from typing import ClassVar

from pydantic import Field, field_validator

from relay.settings import FunctionSettings, http_url

# SQS DelaySeconds accepts at most 900 seconds; a longer wait is a chain of delayed checks.
MAX_SQS_DELAY_SECONDS = 900

_ENV_NAMES = {
    "operations_table": "OPERATIONS_TABLE",
    "idempotency_table": "IDEMPOTENCY_TABLE",
    "payments_bucket": "PAYMENTS_BUCKET",
    "events_topic_arn": "EVENTS_TOPIC_ARN",
    "legacy_payments_url": "LEGACY_PAYMENTS_URL",
    "invoice_api_url": "INVOICE_API_URL",
    "legacy_timeout_seconds": "LEGACY_TIMEOUT_SECONDS",
    "payment_max_age_seconds": "PAYMENT_MAX_AGE_SECONDS",
    "payment_check_base_delay_seconds": "PAYMENT_CHECK_BASE_DELAY_SECONDS",
    "max_body_bytes": "MAX_BODY_BYTES",
    "terminal_ttl_days": "TERMINAL_TTL_DAYS",
    "failed_ttl_days": "FAILED_TTL_DAYS",
}


class Settings(FunctionSettings):
    SERVICE: ClassVar[str] = "payments"
    ENV_NAMES: ClassVar[dict[str, str]] = _ENV_NAMES

    operations_table: str | None = None
    idempotency_table: str | None = None
    payments_bucket: str | None = None
    events_topic_arn: str | None = None
    legacy_payments_url: str | None = None
    invoice_api_url: str | None = None
    legacy_timeout_seconds: float = Field(10.0, gt=0, le=900)
    payment_max_age_seconds: int = Field(3600, gt=0)
    payment_check_base_delay_seconds: int = Field(30, ge=0, le=MAX_SQS_DELAY_SECONDS)
    max_body_bytes: int = Field(1_048_576, gt=0)
    terminal_ttl_days: int = Field(30, gt=0)
    failed_ttl_days: int = Field(90, gt=0)

    @field_validator("legacy_payments_url", "invoice_api_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        return http_url(value, example="https://legacy.example.com")


@functools.cache
def get_settings() -> Settings:
    """The settings of this process, read on first use (tests call ``get_settings.cache_clear()``)."""
    return Settings.from_env()
