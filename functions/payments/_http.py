"""JSON over HTTP with the standard library (Lambda has no ``requests``), classified the kernel's way.

Connection failures and timeouts become DependencyUnavailable (transient: the consumer backs the
message off); HTTP statuses are returned to the caller, which knows which 4xx answers are business
outcomes and classifies the rest with ``relay.errors.classify_http_status``.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from relay.errors import DependencyUnavailable


@dataclass(frozen=True)
class HttpResponse:
    status: int
    body: Any  # parsed JSON, or the text when the body is not JSON
    text: str
    retry_after: float | None


def post_json(
    url: str,
    body: Mapping[str, Any],
    *,
    headers: Mapping[str, str],
    timeout: float,
    what: str,
) -> HttpResponse:
    data = json.dumps(body, separators=(",", ":"), sort_keys=True).encode("utf-8")
    request = urllib.request.Request(  # noqa: S310 - the URL is a configured http(s) base URL
        url,
        data=data,
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return _read(response.status, response.headers, response.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return _read(exc.code, exc.headers, exc.read())
    except TimeoutError as exc:
        raise DependencyUnavailable(
            f"{what} did not answer within {timeout:g} s; will retry with backoff."
        ) from exc
    except (urllib.error.URLError, http.client.HTTPException, ConnectionError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DependencyUnavailable(
            f"{what} unreachable ({type(exc).__name__}: {reason}); will retry with backoff."
        ) from exc


def _read(status: int, headers: Any, raw: bytes) -> HttpResponse:
    text = raw.decode("utf-8", errors="replace")
    try:
        body: Any = json.loads(text) if text else None
    except json.JSONDecodeError:
        body = text
    retry_after: float | None = None
    header = headers.get("Retry-After") if headers is not None else None
    if header:
        try:
            retry_after = float(header)
        except ValueError:
            retry_after = None
    return HttpResponse(status=status, body=body, text=text, retry_after=retry_after)
