"""HMAC-SHA256 signatures on the completion notices Relay POSTs to a client's ``callbackUrl``.

The scheme, for a receiver to implement (any language; Relay's own check is ``verify`` below)::

    Relay-Signature: t=1718000000,v1=5f2b...e9

* ``t`` is the sending time in Unix seconds (an integer).
* ``v1`` is the lowercase hex HMAC-SHA256, keyed with the deployment's signing secret (its UTF-8
  bytes), of the ASCII timestamp, a dot, and the request body exactly as received:
  ``HMAC_SHA256(secret, f"{t}." + raw_body_bytes)``. Compute it over the raw bytes before any JSON
  parsing: re-serialising the parsed body (other spacing, key order or escapes) gives other bytes and
  a signature that does not match.
* A header may carry several ``v1=`` entries (``t=...,v1=<new>,v1=<old>``: one per secret in use
  while a secret is rotated); the notice is genuine if ANY entry matches. Entries with other names (a
  future ``v2=``) are ignored, so a receiver keeps working when a scheme is added.

To accept a notice: parse the header, compute the expected ``v1`` for your secret, compare it with
each ``v1`` entry in constant time (``hmac.compare_digest``; ``==`` leaks how many leading characters
matched), then refuse a timestamp more than 5 minutes from your clock, in either direction: the
signature covers ``t``, so an old notice cannot be given a new time, and the window bounds how long
a captured notice can be replayed. The ``Idempotency-Key`` header is what deduplicates a notice that
Relay itself sends again inside the window.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Callable

SIGNATURE_HEADER = "Relay-Signature"
DEFAULT_TOLERANCE_SECONDS = 300

# Digits only (``int()`` would also take "+5", " 5", "5_0" and other scripts' digits), and few enough
# that a hostile header cannot make the parse or the comparison expensive.
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_HEX_SHA256 = re.compile(r"[0-9a-f]{64}")


class SignatureError(ValueError):
    """A notice whose ``Relay-Signature`` does not prove it came from Relay unchanged, and recently."""


def _check_secret(secret: str) -> None:
    # An empty key still yields an HMAC, one anybody can compute: refuse it instead of signing with it.
    if not secret:
        raise ValueError(
            "the signing secret is empty; configure the deployment's notice signing secret before "
            "signing or verifying notices."
        )


def _v1(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def sign(secret: str, body: bytes, *, now: float | None = None) -> str:
    """The ``Relay-Signature`` value for `body` (the exact bytes that will be sent) at `now`."""
    _check_secret(secret)
    timestamp = int(time.time() if now is None else now)
    return f"t={timestamp},v1={_v1(secret, timestamp, body)}"


def signature_headers(secret: str) -> Callable[[bytes], dict[str, str]]:
    """A ``sign`` callback for ``relay.http.post_json``: the signature header for the bytes it sends."""
    _check_secret(secret)  # now, so a missing secret fails at wiring rather than at the first notice

    def headers(body: bytes) -> dict[str, str]:
        return {SIGNATURE_HEADER: sign(secret, body)}

    return headers


def verify(
    secret: str,
    body: bytes,
    header: str | None,
    *,
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
) -> int:
    """The notice's timestamp when `header` is a valid signature of `body` within the tolerance;
    raises ``SignatureError`` saying why otherwise."""
    _check_secret(secret)
    timestamp, candidates = _parse(header)
    expected = _v1(secret, timestamp, body)
    # Every candidate is compared (no early exit) so the time taken does not say which entry matched.
    matched = False
    for candidate in candidates:
        matched |= hmac.compare_digest(expected, candidate)
    if not matched:
        raise SignatureError(
            f"{SIGNATURE_HEADER} does not match the body: it was changed after signing, or signed with "
            "another secret; reject the notice (check the configured signing secret if every notice fails)."
        )
    # Checked after the match, so "too old" is only said of a notice Relay really signed: a replay.
    current = time.time() if now is None else now
    if current - timestamp > tolerance_seconds:
        raise SignatureError(
            f"{SIGNATURE_HEADER} timestamp {timestamp} is {int(current - timestamp)} s old, more than the "
            f"{tolerance_seconds} s tolerance: a replayed notice; reject it (or check this host's clock)."
        )
    if timestamp - current > tolerance_seconds:
        raise SignatureError(
            f"{SIGNATURE_HEADER} timestamp {timestamp} is {int(timestamp - current)} s in the future, more "
            f"than the {tolerance_seconds} s tolerance; reject the notice and check the clocks."
        )
    return timestamp


def _parse(header: str | None) -> tuple[int, list[str]]:
    if header is None or not header.strip():
        raise SignatureError(
            f"no {SIGNATURE_HEADER} header: the notice is unsigned; reject it (Relay signs every notice)."
        )
    timestamp: int | None = None
    candidates: list[str] = []
    for item in header.split(","):
        name, sep, value = item.strip().partition("=")
        if not sep:
            raise SignatureError(
                f"{SIGNATURE_HEADER} is malformed: {item.strip()[:20]!r} is not name=value; expected "
                "t=<unix seconds>,v1=<hex HMAC-SHA256>."
            )
        if name == "t":
            if timestamp is not None or not _TIMESTAMP.fullmatch(value):
                raise SignatureError(
                    f"{SIGNATURE_HEADER} is malformed: it needs exactly one t=<unix seconds> (digits only)."
                )
            timestamp = int(value)
        elif name == "v1":
            if not _HEX_SHA256.fullmatch(value):
                raise SignatureError(
                    f"{SIGNATURE_HEADER} is malformed: a v1 entry is not 64 lowercase hex digits "
                    "(an HMAC-SHA256)."
                )
            candidates.append(value)
    if timestamp is None:
        raise SignatureError(f"{SIGNATURE_HEADER} is malformed: no t=<unix seconds> entry.")
    if not candidates:
        raise SignatureError(
            f"{SIGNATURE_HEADER} has no v1 signature (the only scheme this receiver knows); reject it."
        )
    return timestamp, candidates
