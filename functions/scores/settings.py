"""The scores functions' configuration: read from the environment once, validated.

Each function gets only what it needs (the authorizer only the secret ARN, the API no verifications
table), so every setting is optional here and asked for with ``settings.require("...")``, which
names the missing variable instead of failing with a KeyError deep in a call.
"""

from __future__ import annotations

import functools
from typing import ClassVar

from pydantic import Field

from relay.settings import FunctionSettings

_ENV_NAMES = {
    "scores_table": "SCORES_TABLE",
    "verifications_table": "VERIFICATIONS_TABLE",
    "idempotency_table": "IDEMPOTENCY_TABLE",
    "snapshot_queue_url": "SNAPSHOT_QUEUE_URL",
    "api_key_secret_arn": "API_KEY_SECRET_ARN",
    "api_key_refresh_seconds": "API_KEY_REFRESH_SECONDS",
}


class Settings(FunctionSettings):
    SERVICE: ClassVar[str] = "scores"
    ENV_NAMES: ClassVar[dict[str, str]] = _ENV_NAMES

    scores_table: str | None = None
    verifications_table: str | None = None
    idempotency_table: str | None = None
    snapshot_queue_url: str | None = None
    api_key_secret_arn: str | None = None
    # After a key mismatch the secret is read again (a rotation), at most once per this many seconds.
    api_key_refresh_seconds: float = Field(60.0, ge=0)


@functools.cache
def get_settings() -> Settings:
    """The settings of this process, read on first use (tests call ``reset_runtime()``)."""
    return Settings.from_env()
