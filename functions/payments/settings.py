"""The payments functions' configuration: read from the environment once, validated.

Each function gets only the variables its own work needs (the API has no legacy URL, the payment
worker no topic), so everything that not every function needs is optional here and asked for with
``settings.require("...")``, which fails with a message naming the variable instead of a KeyError
somewhere deep in a call.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

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


class SettingsError(RuntimeError):
    """The function's environment is incomplete or invalid: a deployment problem, not a message problem."""


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

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
        if value is None:
            return None
        if not value.startswith(("https://", "http://")):
            raise ValueError("must be an http(s) base URL, e.g. https://legacy.example.com")
        return value.rstrip("/")

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
            raise SettingsError(f"invalid payments configuration: {problems}") from None

    def require(self, field: str) -> str:
        """The value of an optional setting this function cannot work without."""
        value = getattr(self, field)
        if not value:
            raise SettingsError(
                f"environment variable {_ENV_NAMES[field]} is not set; this function needs it "
                "(the payments stack sets it -- check the function's configuration)."
            )
        return str(value)


@functools.cache
def get_settings() -> Settings:
    """The settings of this process, read on first use (tests call ``get_settings.cache_clear()``)."""
    return Settings.from_env()
