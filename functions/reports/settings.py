"""The reports functions' configuration: read from the environment once, validated.

Each function gets only the variables its own work needs (the notifier has no verifications table),
so everything not every function needs is optional here and asked for with
``settings.require("...")``, which names the missing variable instead of failing with a KeyError.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

_ENV_NAMES = {
    "verifications_table": "VERIFICATIONS_TABLE",
    "idempotency_table": "IDEMPOTENCY_TABLE",
    "report_api_url": "REPORT_API_URL",
    "notify_webhook_url": "NOTIFY_WEBHOOK_URL",
    "verify_max_age_seconds": "VERIFY_MAX_AGE_SECONDS",
    "http_timeout_seconds": "HTTP_TIMEOUT_SECONDS",
    "verify_max_bytes": "VERIFY_MAX_BYTES",
}


class SettingsError(RuntimeError):
    """The function's environment is incomplete or invalid: a deployment problem, not a message problem."""


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

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
        if value is None:
            return None
        if not value.startswith(("https://", "http://")):
            raise ValueError("must be an http(s) URL, e.g. https://reports.example.com")
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
            raise SettingsError(f"invalid reports configuration: {problems}") from None

    def require(self, field: str) -> str:
        """The value of an optional setting this function cannot work without."""
        value = getattr(self, field)
        if not value:
            raise SettingsError(
                f"environment variable {_ENV_NAMES[field]} is not set; this function needs it "
                "(the reports stack sets it -- check the function's configuration)."
            )
        return str(value)


@functools.cache
def get_settings() -> Settings:
    """The settings of this process, read on first use (tests call ``reset_runtime()``)."""
    return Settings.from_env()
