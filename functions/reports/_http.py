"""HTTP with the standard library (Lambda has no ``requests``), classified the kernel's way.

Two calls: ``fetch_digest`` streams a GET response into sha256 (the report is never held in memory
whole) and ``post_json`` sends a JSON body. Connection failures and timeouts become
DependencyUnavailable (transient: the consumer backs the message off); HTTP statuses are returned to
the caller, which knows which answers are business outcomes (404 "not visible yet", 3xx) and
classifies the rest with ``relay.errors.classify_http_status``.

Redirects are NOT followed: urllib would follow a 30x to any host, which turns a URL check done
before the request (see ``reports.verification.report_url``) into a bypassable one -- an SSRF hole
towards e.g. the instance metadata endpoint. A 3xx is returned as a status like any other.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from relay.errors import DependencyUnavailable

_CHUNK = 64 * 1024
_ERROR_BODY_LIMIT = 2048


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        # None makes urllib raise HTTPError with the 3xx status instead of following it.
        return None


_opener = urllib.request.build_opener(_NoRedirect)


@dataclass(frozen=True)
class Digest:
    """The answer to a GET: status, and for a 2xx the sha256 (hex) and size of the whole body."""

    status: int
    sha256: str | None
    size: int
    text: str  # the start of a non-2xx body, for error messages
    retry_after: float | None
    location: str | None = None


class TooLarge(Exception):
    """The response body is larger than the caller's limit."""


@dataclass(frozen=True)
class HttpResponse:
    status: int
    body: Any  # parsed JSON, or the text when the body is not JSON
    text: str
    retry_after: float | None


def fetch_digest(url: str, *, timeout: float, max_bytes: int, what: str) -> Digest:
    request = urllib.request.Request(url, method="GET", headers={"Accept": "*/*"})  # noqa: S310
    try:
        with _opener.open(request, timeout=timeout) as response:
            digest = hashlib.sha256()
            size = 0
            while chunk := response.read(_CHUNK):
                size += len(chunk)
                if size > max_bytes:
                    raise TooLarge(f"{what} answered more than {max_bytes} bytes for {url}")
                digest.update(chunk)
            return Digest(response.status, digest.hexdigest(), size, "", None)
    except urllib.error.HTTPError as exc:
        with exc:
            raw = exc.read(_ERROR_BODY_LIMIT)
            return Digest(
                exc.code,
                None,
                len(raw),
                raw.decode("utf-8", errors="replace"),
                _retry_after(exc.headers),
                location=exc.headers.get("Location") if exc.headers is not None else None,
            )
    except TimeoutError as exc:
        raise DependencyUnavailable(
            f"{what} did not answer within {timeout:g} s; will retry with backoff."
        ) from exc
    except (urllib.error.URLError, http.client.HTTPException, ConnectionError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DependencyUnavailable(
            f"{what} unreachable ({type(exc).__name__}: {reason}); will retry with backoff."
        ) from exc


def post_json(
    url: str,
    body: Mapping[str, Any],
    *,
    headers: Mapping[str, str],
    timeout: float,
    what: str,
) -> HttpResponse:
    data = json.dumps(body, separators=(",", ":"), sort_keys=True).encode("utf-8")
    request = urllib.request.Request(  # noqa: S310 - the URL is a configured http(s) URL
        url,
        data=data,
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json", **headers},
    )
    try:
        with _opener.open(request, timeout=timeout) as response:
            return _read(response.status, response.headers, response.read(_ERROR_BODY_LIMIT))
    except urllib.error.HTTPError as exc:
        with exc:
            return _read(exc.code, exc.headers, exc.read(_ERROR_BODY_LIMIT))
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
    return HttpResponse(status=status, body=body, text=text, retry_after=_retry_after(headers))


def _retry_after(headers: Any) -> float | None:
    header = headers.get("Retry-After") if headers is not None else None
    if not header:
        return None
    try:
        return float(header)
    except ValueError:
        return None  # an HTTP date: the kernel's own backoff is good enough
