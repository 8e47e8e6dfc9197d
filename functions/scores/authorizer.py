"""HTTP API Lambda authorizer (payload format 2.0, simple responses) for ``POST /score-snapshots``.

The caller (EventBridge's API Destination, through its Connection) sends ``x-api-key``. API Gateway
answers 401 itself when the header is missing (it is the authorizer's identity source, so we are not
even invoked); here a key that differs from the Secrets Manager secret gives ``isAuthorized: false``,
which API Gateway answers with 403.

The secret is read once per container and kept. A mismatch may mean the secret was rotated since,
so it is read again -- at most once per ``API_KEY_REFRESH_SECONDS`` (60), so a caller spraying wrong
keys cannot turn every request into a Secrets Manager call. Keys are compared with
``hmac.compare_digest`` (no timing oracle) and never logged, not even in part.

When the secret cannot be read at all the authorizer raises: API Gateway answers 500, which the API
Destination retries, instead of a 403 that would wrongly say "your key is wrong".
"""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from relay.observability import logger as relay_logger
from scores.settings import get_settings

logger = relay_logger()

API_KEY_HEADER = "x-api-key"


class ApiKey:
    """The expected API key, cached, refreshed on a mismatch at most once per ``refresh_seconds``."""

    def __init__(
        self,
        secret_arn: str,
        *,
        secrets_client: Any,
        refresh_seconds: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.secret_arn = secret_arn
        self.secrets = secrets_client
        self.refresh_seconds = refresh_seconds
        self.clock = clock
        self._value: bytes | None = None
        self._fetched_at: float | None = None
        self._lock = threading.Lock()
        self.fetches = 0

    def _fetch(self) -> None:
        response = self.secrets.get_secret_value(SecretId=self.secret_arn)
        secret = response.get("SecretString")
        if not isinstance(secret, str) or not secret.strip():
            raise RuntimeError(f"secret {self.secret_arn} has no SecretString; it must hold the API key")
        self._value = secret.strip().encode("utf-8")
        self._fetched_at = self.clock()
        self.fetches += 1

    def matches(self, presented: str) -> bool:
        candidate = presented.encode("utf-8")
        with self._lock:
            if self._value is None:
                self._fetch()
            assert self._value is not None
            if hmac.compare_digest(candidate, self._value):
                return True
            if self._fetched_at is not None and self.clock() - self._fetched_at < self.refresh_seconds:
                return False
            try:
                self._fetch()
            except Exception:
                # Keep the cached key: a Secrets Manager hiccup must not lock the caller out.
                logger.warning("could not refresh the API key secret; using the cached one", exc_info=True)
                self._fetched_at = self.clock()
                return False
            return hmac.compare_digest(candidate, self._value)


_api_key: ApiKey | None = None


def api_key() -> ApiKey:
    global _api_key
    if _api_key is None:
        import boto3
        from botocore.config import Config

        settings = get_settings()
        _api_key = ApiKey(
            settings.require("api_key_secret_arn"),
            secrets_client=boto3.client(
                "secretsmanager",
                config=Config(
                    retries={"mode": "standard", "max_attempts": 2}, connect_timeout=1, read_timeout=2
                ),
            ),
            refresh_seconds=settings.api_key_refresh_seconds,
        )
    return _api_key


def reset_api_key() -> None:
    global _api_key
    _api_key = None


def presented_key(event: Mapping[str, Any]) -> str | None:
    headers = event.get("headers") or {}
    for name, value in headers.items():
        if str(name).lower() == API_KEY_HEADER and isinstance(value, str) and value:
            return value
    return None


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, bool]:
    key = presented_key(event)
    context_info = event.get("requestContext") or {}
    where = {
        "route": event.get("routeKey"),
        "source_ip": (context_info.get("http") or {}).get("sourceIp"),
        "request_id": context_info.get("requestId"),
    }
    if key is None:
        # Only reachable when the identity source is misconfigured: API Gateway answers 401 first.
        logger.warning("request without an API key denied", extra=where)
        return {"isAuthorized": False}
    authorized = api_key().matches(key)
    if authorized:
        logger.debug("API key accepted", extra=where)
    else:
        logger.warning("wrong API key denied", extra=where)
    return {"isAuthorized": authorized}
