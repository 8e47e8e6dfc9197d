"""The scores API key: the Secrets Manager secret the authorizer compares a caller's key with.

Read once per container and kept (Powertools Parameters' ``SecretsProvider`` cache; it calls
``GetSecretValue`` only, the one action the authorizer's role is granted). A mismatch may mean the
secret was rotated since, so it is read again (``force_fetch``) -- at most once per
``API_KEY_REFRESH_SECONDS`` (60), so a caller spraying wrong keys cannot turn every request into a
Secrets Manager call. Keys are compared with ``hmac.compare_digest`` (no timing oracle) and never
logged, not even in part. A secret without a ``SecretString`` (binary or blank) is an error naming the
secret; it is never cached, so a fixed secret is picked up by the next request. A failed re-read
keeps the key already read.
"""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.parameters import SecretsProvider
from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

from relay.observability import logger

if TYPE_CHECKING:
    from mypy_boto3_secretsmanager import SecretsManagerClient

# Powertools' cache forgets a value after max_age; the key is kept until a mismatch re-reads it.
_KEEP_SECONDS = 10 * 365 * 24 * 3600


class ApiKeySecretError(RuntimeError):
    """The API key secret could not be read (API Gateway answers 500; the API Destination retries)."""


class ApiKeySecret(SecretsProvider):
    """Powertools' Secrets Manager provider that counts its reads and refuses (so never caches) a value
    that is not a non-blank string."""

    def __init__(self, secrets_client: SecretsManagerClient) -> None:
        super().__init__(boto3_client=secrets_client)
        self.fetches = 0

    def _get(self, name: str, **sdk_options: Any) -> str:
        self.fetches += 1
        value = super()._get(name, **sdk_options)
        if not isinstance(value, str) or not value.strip():
            raise ValueError("it has no SecretString (binary or blank); it must hold the API key as text")
        return value.strip()


class ApiKey:
    """The expected API key, cached, re-read on a mismatch at most once per ``refresh_seconds``."""

    def __init__(
        self,
        secret_arn: str,
        *,
        secrets_client: SecretsManagerClient,
        refresh_seconds: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.secret_arn = secret_arn
        self.refresh_seconds = refresh_seconds
        self.clock = clock
        self.secret = ApiKeySecret(secrets_client)
        self._read_at: float | None = None
        self._lock = threading.Lock()

    @property
    def fetches(self) -> int:
        """How many times Secrets Manager was asked for the key."""
        return self.secret.fetches

    def _key(self, *, refresh: bool = False) -> bytes:
        try:
            value = self.secret.get(self.secret_arn, max_age=_KEEP_SECONDS, force_fetch=refresh)
        except GetParameterError as exc:
            raise ApiKeySecretError(f"could not read the API key secret {self.secret_arn}: {exc}") from exc
        if refresh or self._read_at is None:
            self._read_at = self.clock()
        assert isinstance(value, str)  # ApiKeySecret returns text or raises
        return value.encode("utf-8")

    def matches(self, presented: str) -> bool:
        candidate = presented.encode("utf-8")
        with self._lock:
            if hmac.compare_digest(candidate, self._key()):
                return True
            if self._read_at is not None and self.clock() - self._read_at < self.refresh_seconds:
                return False
            try:
                key = self._key(refresh=True)
            except ApiKeySecretError:
                # Keep the cached key: a Secrets Manager hiccup must not lock the caller out.
                logger().warning("could not refresh the API key secret; using the cached one", exc_info=True)
                self._read_at = self.clock()
                return False
            return hmac.compare_digest(candidate, key)
