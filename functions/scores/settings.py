"""The scores functions' settings and, per function, the ones it needs (``relay.settings``: the stack
and the function read the same declaration); the API key is a Secrets Manager secret, read by the
authorizer only.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from relay.settings import FunctionEnvironment, ServiceSettings


class Settings(ServiceSettings):
    SERVICE: ClassVar[str] = "scores"

    scores_table: str | None = None
    verifications_table: str | None = None
    snapshot_queue_url: str | None = None
    api_key_secret_arn: str | None = None
    # After a key mismatch the secret is read again (a rotation), at most once per this many seconds.
    api_key_refresh_seconds: float = Field(60.0, ge=0)


# What each function needs (the stack sets exactly these; the function checks them at cold start).
AUTHORIZER = FunctionEnvironment(
    Settings, "authorizer", required=("api_key_secret_arn",), optional=("api_key_refresh_seconds",)
)
API = FunctionEnvironment(Settings, "api", required=("scores_table", "snapshot_queue_url"))
SNAPSHOT_WORKER = FunctionEnvironment(
    Settings, "snapshot-worker", required=("scores_table", "verifications_table", "idempotency_table")
)
