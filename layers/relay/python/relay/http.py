"""JSON over HTTP with the standard library (Lambda has no ``requests``), classified the kernel's way.

Connection failures and timeouts are transient (the consumer retries the message later), in two kinds:
``DependencyUnavailable`` when the request never left (connection refused, DNS, any failure while
connecting or sending), ``OutcomeUnknown`` when it did and the call may have taken effect (no answer
within the timeout, the connection dropped before the answer or in the middle of it). HTTP statuses are
returned to the caller, which knows which answers are business outcomes (a 404 "not visible yet", a 422
rejection) and classifies the rest with ``relay.errors.classify_http_status``; ``KeyedApi.answer``
also makes a 500, 502 or 504 ``OutcomeUnknown``.

Redirects are NOT followed: urllib would follow a 30x to any host, which turns a URL check done before
the request into a bypassable one (an SSRF hole towards, say, the instance metadata endpoint). A 3xx is
returned as a status like any other.

A ``sign`` callback (``relay.signing.signature_headers``) adds headers computed over the exact bytes
sent, so a receiver can check them against the raw body it reads.

``connect_to`` pins the connection to an address already vetted (``relay.callback_urls``): the socket
dials it instead of resolving the URL's host again, while the Host header, TLS SNI and the
certificate check keep the URL's host name.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from relay.errors import (
    BusinessRejection,
    DependencyUnavailable,
    OutcomeUnknown,
    PayloadConflict,
    classify_http_status,
)

# Enough for any JSON answer we act on; a larger body is cut (and then fails JSON parsing visibly).
RESPONSE_BODY_LIMIT = 1024 * 1024
# Answers after which a keyed call may have taken effect: 500 (failed midway), 502 and 504 (a gateway
# lost or timed out on the answer of a request it had forwarded). 503 and 429 say "not now": not done.
OUTCOME_UNKNOWN_STATUSES = frozenset({500, 502, 504})


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        # None makes urllib raise HTTPError with the 3xx status instead of following it.
        return None


OPENER = urllib.request.build_opener(_NoRedirect)


def _pinned(cls: type[http.client.HTTPConnection], address: str) -> Callable[..., http.client.HTTPConnection]:
    """A connection class for urllib's ``do_open`` that dials ``address`` for whatever host it is given:
    ``connect`` calls ``_create_connection((host, port), ...)``, and HTTPS then wraps the socket with
    ``server_hostname=host``, so SNI and certificate verification stay on the URL's name."""

    def connection(host: str, **kwargs: Any) -> http.client.HTTPConnection:
        conn = cls(host, **kwargs)

        def dial(target: tuple[str, int], timeout: Any = None, source: Any = None) -> socket.socket:
            return socket.create_connection((address, target[1]), timeout, source)

        conn._create_connection = dial  # type: ignore[attr-defined]
        return conn

    return connection


class _PinnedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, address: str) -> None:
        super().__init__()
        self.address = address

    def http_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(_pinned(http.client.HTTPConnection, self.address), req)


class _PinnedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, address: str, context: ssl.SSLContext | None) -> None:
        super().__init__(context=context or ssl.create_default_context())
        self.address = address

    def https_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(
            _pinned(http.client.HTTPSConnection, self.address),
            req,
            context=self._context,  # type: ignore[attr-defined]
        )


def opener(connect_to: str | None = None, tls: ssl.SSLContext | None = None) -> urllib.request.OpenerDirector:
    """The opener for one exchange: redirects refused, and pinned to ``connect_to`` when given."""
    if connect_to is None and tls is None:
        return OPENER
    if connect_to is None:
        return urllib.request.build_opener(_NoRedirect, urllib.request.HTTPSHandler(context=tls))
    # No proxy from the environment either: the pinned address is where the request goes.
    return urllib.request.build_opener(
        urllib.request.ProxyHandler({}),
        _NoRedirect,
        _PinnedHTTPHandler(connect_to),
        _PinnedHTTPSHandler(connect_to, tls),
    )


@dataclass(frozen=True)
class HttpResponse:
    status: int
    body: Any  # parsed JSON, or the text when the body is not JSON
    text: str
    retry_after: float | None


# Raised once the request is out, while waiting for or reading the answer: the server may have acted.
_DROPPED_AFTER_SENDING = (http.client.RemoteDisconnected, ConnectionResetError, http.client.IncompleteRead)


@contextmanager
def transient_network_errors(what: str, timeout: float) -> Iterator[None]:
    """Turn timeouts and connection failures into DependencyUnavailable, or OutcomeUnknown when the
    request had been sent (the one place that does)."""
    try:
        yield
    except urllib.error.HTTPError:
        raise
    except urllib.error.URLError as exc:
        # urllib wraps what fails while connecting and sending the request (refused, DNS, a connect
        # timeout): the server never got a whole request to act on.
        raise DependencyUnavailable(
            f"{what} unreachable ({type(exc).__name__}: {exc.reason}); will retry with backoff."
        ) from exc
    except TimeoutError as exc:  # socket.timeout is TimeoutError: waiting for the answer timed out
        raise OutcomeUnknown(
            f"{what} did not answer within {timeout:g} s; the request was sent and may have taken "
            "effect; will retry with backoff."
        ) from exc
    except _DROPPED_AFTER_SENDING as exc:
        raise OutcomeUnknown(
            f"{what} dropped the connection before answering in full ({type(exc).__name__}: {exc}); the "
            "request was sent and may have taken effect; will retry with backoff."
        ) from exc
    except (http.client.HTTPException, ConnectionError, OSError) as exc:
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
    sign: Callable[[bytes], Mapping[str, str]] | None = None,
    connect_to: str | None = None,
    tls: ssl.SSLContext | None = None,
) -> HttpResponse:
    """POST `body` as JSON; `what` names the system in error messages ("legacy payment system").

    `sign(data)` returns headers to add (a signature), given the encoded body: computed here, over the
    bytes that go on the wire, because a signature over the mapping would depend on how it is encoded.
    `connect_to`: the vetted address to dial instead of resolving the host (see the module docstring);
    `tls`: the context that verifies the server (default: the system's trust store).
    """
    data = json.dumps(body, separators=(",", ":"), sort_keys=True).encode("utf-8")
    signature = sign(data) if sign is not None else {}
    request = urllib.request.Request(  # noqa: S310 - the URL is a configured http(s) URL
        url,
        data=data,
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json", **headers, **signature},
    )
    return _exchange(request, timeout=timeout, what=what, via=opener(connect_to, tls))


def get_url(url: str, *, headers: Mapping[str, str] | None = None, timeout: float, what: str) -> HttpResponse:
    """GET `url` (JSON expected); errors as for ``post_json``."""
    request = urllib.request.Request(  # noqa: S310 - the URL is a configured http(s) URL
        url, method="GET", headers={"Accept": "application/json", **(headers or {})}
    )
    return _exchange(request, timeout=timeout, what=what)


def _exchange(
    request: urllib.request.Request,
    *,
    timeout: float,
    what: str,
    via: urllib.request.OpenerDirector = OPENER,
) -> HttpResponse:
    with transient_network_errors(what, timeout):
        try:
            with via.open(request, timeout=timeout) as response:
                raw = response.read(RESPONSE_BODY_LIMIT)
                _check_complete(response, raw)
                return _read(response.status, response.headers, raw)
        except urllib.error.HTTPError as exc:
            with exc:
                return _read(exc.code, exc.headers, exc.read(RESPONSE_BODY_LIMIT))


class WebhookClient:
    """``POST`` a JSON notification to a configured webhook with ``Idempotency-Key``; any answer but
    a 2xx raises the kernel's error for it (a 3xx is never followed: parked, the URL needs fixing)."""

    def __init__(
        self,
        url: str,
        *,
        timeout_seconds: float,
        what: str,
        connect_to: str | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.url = url
        self.timeout_seconds = timeout_seconds
        self.what = what
        self.connect_to = connect_to  # the vetted address (relay.callback_urls), or None: resolve the host
        self.tls = tls

    def send(
        self,
        body: Mapping[str, Any],
        *,
        idempotency_key: str,
        sign: Callable[[bytes], Mapping[str, str]] | None = None,
    ) -> dict[str, Any]:
        """`sign`: as for ``post_json`` (``relay.signing.signature_headers(secret)`` for a signed notice)."""
        response = post_json(
            self.url,
            body,
            headers={"Idempotency-Key": idempotency_key},
            timeout=self.timeout_seconds,
            what=self.what,
            sign=sign,
            connect_to=self.connect_to,
            tls=self.tls,
        )
        if 300 <= response.status < 400:
            raise BusinessRejection(
                f"{self.what} answered a redirect (HTTP {response.status}); not followed. Parked: configure "
                f"the final URL instead of {self.url}, then redrive."
            )
        error = classify_http_status(
            response.status, response.text, retry_after=response.retry_after, what=self.what
        )
        if error is not None:
            raise error
        return {"status": response.status}


def _check_complete(response: Any, raw: bytes) -> None:
    """``read(n)`` returns a body cut short by a dropped connection without a word (only the
    unsized read raises IncompleteRead): compare with what Content-Length promised."""
    missing = getattr(response, "length", None)
    if isinstance(missing, int) and missing > 0 and len(raw) < RESPONSE_BODY_LIMIT:
        raise http.client.IncompleteRead(raw, missing)


def retry_after(headers: Any) -> float | None:
    header = headers.get("Retry-After") if headers is not None else None
    if not header:
        return None
    try:
        return float(header)
    except ValueError:
        return None  # an HTTP date: the kernel's own backoff is good enough


def _read(status: int, headers: Any, raw: bytes) -> HttpResponse:
    text = raw.decode("utf-8", errors="replace")
    try:
        body: Any = json.loads(text) if text else None
    except (ValueError, RecursionError):  # not JSON, or JSON no caller can use (too deep, huge numbers)
        body = text
    return HttpResponse(status=status, body=body, text=text, retry_after=retry_after(headers))


class KeyedApi:
    """A partner HTTP API that deduplicates by an ``Idempotency-Key`` header and answers ``422
    {"error": "IdempotencyKeyReused"}`` when a key comes back with another body (the legacy payment
    system, the invoice API)."""

    def __init__(self, base_url: str, *, timeout_seconds: float, what: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_seconds = timeout_seconds
        self.what = what

    def post(self, path: str, body: Mapping[str, Any], *, idempotency_key: str) -> HttpResponse:
        return post_json(
            f"{self.base_url}{path}",
            body,
            headers={"Idempotency-Key": idempotency_key},
            timeout=self.timeout_seconds,
            what=self.what,
        )

    def get(self, path: str) -> HttpResponse:
        """A read (no side effect, no key): e.g. the state of a payment under its key."""
        return get_url(f"{self.base_url}{path}", timeout=self.timeout_seconds, what=self.what)

    def answer(self, response: HttpResponse, *, idempotency_key: str, not_done: str) -> dict[str, Any]:
        """The body of a successful answer; a reused key is a ``PayloadConflict`` (``not_done`` says
        what this call did not do), a 500, 502 or 504 ``OutcomeUnknown`` (the partner, or a gateway in
        front of it, may have done the work before failing to answer), anything else
        ``classify_http_status`` decides."""
        body = response.body if isinstance(response.body, dict) else {}
        if response.status == 422 and body.get("error") == "IdempotencyKeyReused":
            raise PayloadConflict(
                f"{self.what} refused Idempotency-Key {idempotency_key}: it was used with a different "
                f"request body. {not_done} Investigate before redriving."
            )
        error = classify_http_status(
            response.status, response.text, retry_after=response.retry_after, what=self.what
        )
        if response.status in OUTCOME_UNKNOWN_STATUSES and isinstance(error, DependencyUnavailable):
            raise OutcomeUnknown(str(error), retry_after=error.retry_after)
        if error is not None:
            raise error
        return body
