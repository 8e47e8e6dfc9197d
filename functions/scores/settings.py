"""The scores functions' configuration: read from the environment once, validated.

Each function gets only what it needs (the authorizer only the secret ARN, the API no verifications
table), so every setting is optional here and asked for with ``settings.require("...")``, which
names the missing variable instead of failing with a KeyError deep in a call.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

_ENV_NAMES = {
    "scores_table": "SCORES_TABLE",
    "verifications_table": "VERIFICATIONS_TABLE",
    "idempotency_table": "IDEMPOTENCY_TABLE",
    "snapshot_queue_url": "SNAPSHOT_QUEUE_URL",
    "api_key_secret_arn": "API_KEY_SECRET_ARN",
    "api_key_refresh_seconds": "API_KEY_REFRESH_SECONDS",
}


class SettingsError(RuntimeError):
    """The function's environment is incomplete or invalid: a deployment problem, not a request problem."""


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    scores_table: str | None = None
    verifications_table: str | None = None
    idempotency_table: str | None = None
    snapshot_queue_url: str | None = None
    api_key_secret_arn: str | None = None
    # After a key mismatch the secret is read again (a rotation), at most once per this many seconds.
    api_key_refresh_seconds: float = Field(60.0, ge=0)

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
            raise SettingsError(f"invalid scores configuration: {problems}") from None

    def require(self, field: str) -> str:
        value = getattr(self, field)
        if not value:
            raise SettingsError(
                f"environment variable {_ENV_NAMES[field]} is not set; this function needs it "
                "(the scores stack sets it -- check the function's configuration)."
            )
        return str(value)


@functools.cache
def get_settings() -> Settings:
    """The settings of this process, read on first use (tests call ``reset_runtime()``)."""
    return Settings.from_env()
