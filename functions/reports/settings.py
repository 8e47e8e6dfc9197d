"""The reports functions' configuration: read from the environment once, validated.

Each function gets only the variables its own work needs (the notifier has no verifications table),
so everything not every function needs is optional here and asked for with
``settings.require("...")``, which names the missing variable instead of failing with a KeyError.
"""

from __future__ import annotations

import functools
from typing import ClassVar

from pydantic import Field, field_validator

from relay.settings import FunctionSettings, http_url

_ENV_NAMES = {
    "verifications_table": "VERIFICATIONS_TABLE",
    "idempotency_table": "IDEMPOTENCY_TABLE",
    "report_api_url": "REPORT_API_URL",
    "notify_webhook_url": "NOTIFY_WEBHOOK_URL",
    "verify_max_age_seconds": "VERIFY_MAX_AGE_SECONDS",
    "http_timeout_seconds": "HTTP_TIMEOUT_SECONDS",
    "verify_max_bytes": "VERIFY_MAX_BYTES",
}


class Settings(FunctionSettings):
    SERVICE: ClassVar[str] = "reports"
    ENV_NAMES: ClassVar[dict[str, str]] = _ENV_NAMES

    verifications_table: str | None = None
    idempotency_table: str | None = None
    report_api_url: str | None = None
    notify_webhook_url: str | None = None
    # A report not found yet is retried (transient) until it is this old, then recorded UNREACHABLE.
    verify_max_age_seconds: int = Field(3600, gt=0)
    http_timeout_seconds: float = Field(5.0, gt=0, le=60)
    # A report larger than this is not read to the end (a runaway or hostile response).
    verify_max_bytes: int = Field(50 * 1024 * 1024, gt=0)

    @field_validator("report_api_url", "notify_webhook_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return http_url(value, example="https://reports.example.com")


@functools.cache
def get_settings() -> Settings:
    """The settings of this process, read on first use (tests call ``reset_runtime()``)."""
    return Settings.from_env()
