"""Reading a report back: ``fetch_digest`` streams a GET response into sha256 (the report is never held in
memory whole). Built on ``relay.http``: no redirects followed (see ``reports.verification.report_url``
for the SSRF guard a redirect would bypass), timeouts and connection failures are transient."""

from __future__ import annotations

import hashlib
import urllib.error
import urllib.request
from dataclasses import dataclass

from relay.http import OPENER, HttpResponse, post_json, retry_after, transient_network_errors

__all__ = ["Digest", "HttpResponse", "TooLarge", "fetch_digest", "post_json"]

_CHUNK = 64 * 1024
_ERROR_BODY_LIMIT = 2048


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


def fetch_digest(url: str, *, timeout: float, max_bytes: int, what: str) -> Digest:
    request = urllib.request.Request(url, method="GET", headers={"Accept": "*/*"})  # noqa: S310
    with transient_network_errors(what, timeout):
        try:
            with OPENER.open(request, timeout=timeout) as response:
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
                    retry_after(exc.headers),
                    location=exc.headers.get("Location") if exc.headers is not None else None,
                )
