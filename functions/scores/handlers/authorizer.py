"""HTTP API Lambda authorizer (payload format 2.0, simple responses) for ``POST /score-snapshots``.

The caller (EventBridge's API Destination, through its Connection) sends ``x-api-key``. API Gateway
answers 401 itself when the header is missing (it is the authorizer's identity source, so we are not
even invoked); here a key that differs from the Secrets Manager secret gives ``isAuthorized: false``,
which API Gateway answers with 403.

The key is read once per container and re-read on a mismatch at most once a minute
(``scores.api_key``, Powertools Parameters underneath).

When the secret cannot be read at all the authorizer raises: API Gateway answers 500, which the API
Destination retries, instead of a 403 that would wrongly say "your key is wrong". A secret without a
``SecretString`` (binary or blank) is such an error, naming the secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from relay.observability import annotate_correlation_id, inject_lambda_context, trace_handler
from relay.observability import logger as relay_logger
from scores.api_key import ApiKey, ApiKeySecretError
from scores.settings import AUTHORIZER
from scores.wiring import wiring

__all__ = ["ApiKey", "ApiKeySecretError"]

logger = relay_logger()
_wiring = wiring.checked(AUTHORIZER)

API_KEY_HEADER = "x-api-key"


def api_key() -> ApiKey:
    """The expected key of this container (read at the first request, kept in the wiring)."""
    return _wiring().api_key


def presented_key(event: Mapping[str, Any]) -> str | None:
    headers = event.get("headers") or {}
    for name, value in headers.items():
        if str(name).lower() == API_KEY_HEADER and isinstance(value, str) and value:
            return value
    return None


@inject_lambda_context
@trace_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, bool]:
    key = presented_key(event)
    context_info = event.get("requestContext") or {}
    # The same correlation id as the API function's trace of this request (relay.api.lambda_handler).
    annotate_correlation_id(
        (event.get("headers") or {}).get("x-correlation-id") or context_info.get("requestId")
    )
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
