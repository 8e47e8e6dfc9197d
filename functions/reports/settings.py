"""The reports functions' settings and, per function, the ones it needs (``relay.settings``: the stack
and the function read the same declaration); the report API and webhook URLs come from the stage
config.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, field_validator

from relay.settings import FunctionEnvironment, ServiceSettings, http_url


class Settings(ServiceSettings):
    SERVICE: ClassVar[str] = "reports"

    verifications_table: str | None = None
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


# What each function needs (the stack sets exactly these; the function checks them at cold start).
VERIFIER = FunctionEnvironment(
    Settings,
    "verifier",
    required=("verifications_table", "report_api_url"),
    optional=("verify_max_age_seconds", "http_timeout_seconds", "verify_max_bytes"),
)
NOTIFIER = FunctionEnvironment(
    Settings,
    "notifier",
    required=("idempotency_table", "notify_webhook_url"),
    optional=("http_timeout_seconds", "report_api_url"),
)
