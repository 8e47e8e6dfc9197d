"""Completion notices signed as Standard Webhooks (https://www.standardwebhooks.com/, spec 1.0.0).

A notice is a POST whose three headers a receiver checks with any Standard Webhooks library (in
Python, ``standardwebhooks.webhooks.Webhook(secret).verify(body, headers)``)::

    webhook-id: <operationId>:notice         the same on every retry: deduplicate on it
    webhook-timestamp: 1718000000             when this attempt was signed, Unix seconds
    webhook-signature: v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=

* ``v1,`` is followed by the base64 HMAC-SHA256, keyed with the secret's bytes, of
  ``{webhook-id}.{webhook-timestamp}.{body}``: the body exactly as received, before any JSON parsing.
* The secret is ``whsec_`` and the base64 of 24 to 64 random bytes. Relay's key in Secrets Manager
  holds it with or without the prefix (CloudFormation generates 64 letters and digits, which are the
  base64 of 48 bytes), and may hold several secrets separated by spaces while one is rotated: the
  notice then carries one ``v1,`` entry per secret, space-separated, and a receiver accepts any.
* A receiver refuses a timestamp more than 5 minutes from its clock, in either direction: the
  signature covers it, so an old notice cannot be given a new time.

``verify`` is Relay's own check (the webhook fake and the tests use it), stricter than the format
asks: bounded header sizes, digits-only timestamps, well-formed entries, and the reason for a refusal.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import time
from collections.abc import Callable, Mapping

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
SECRET_PREFIX = "whsec_"  # noqa: S105 -- the format's prefix, not a secret
DEFAULT_TOLERANCE_SECONDS = 300
# The format's symmetric key: at least 24 bytes (192 bits), at most 64.
MIN_KEY_BYTES, MAX_KEY_BYTES = 24, 64
# Bounds on what a hostile request can make the parse and the comparisons do.
MAX_SIGNATURE_ENTRIES = 8
MAX_SIGNATURE_HEADER_CHARS = 1024

# The id must not be user controlled, or at least hold no ".": it is the first field of what is signed.
_MESSAGE_ID = re.compile(r"[A-Za-z0-9_:-]{1,256}")
# Digits only (``int()`` would also take "+5", " 5", "5_0" and other scripts' digits).
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_BASE64_SHA256 = re.compile(r"[A-Za-z0-9+/]{43}=")


class SignatureError(ValueError):
    """A notice whose Standard Webhooks headers do not prove it came from Relay unchanged, recently."""


def keys(secret: str) -> list[bytes]:
    """The HMAC keys in `secret`: one or more ``whsec_<base64>`` (or bare base64), space-separated,
    the current one first. Refuses an empty or short key: an HMAC anybody could compute."""
    parts = secret.split()
    if not parts:
        raise ValueError(
            "the signing secret is empty; configure the deployment's notice signing secret before "
            "signing or verifying notices."
        )
    decoded = []
    for n, part in enumerate(parts, start=1):
        encoded = part.removeprefix(SECRET_PREFIX)
        try:
            key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(
                f"signing secret {n} of {len(parts)} is not whsec_ followed by base64; a Standard Webhooks "
                "secret is whsec_<base64 of 24 to 64 random bytes>."
            ) from None
        if not MIN_KEY_BYTES <= len(key) <= MAX_KEY_BYTES:
            raise ValueError(
                f"signing secret {n} of {len(parts)} is {len(key)} bytes; a Standard Webhooks secret "
                f"holds {MIN_KEY_BYTES} to {MAX_KEY_BYTES} random bytes."
            )
        decoded.append(key)
    return decoded


def _v1(key: bytes, message_id: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(key, f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def _check_id(message_id: str) -> None:
    if not _MESSAGE_ID.fullmatch(message_id):
        raise ValueError(
            f"webhook id {message_id[:40]!r} must be 1 to 256 letters, digits, '_', ':' or '-' (no '.')"
        )


def sign(secret: str, message_id: str, body: bytes, *, now: float | None = None) -> dict[str, str]:
    """The three headers for `body` (the exact bytes that will be sent) as `message_id` at `now`."""
    _check_id(message_id)
    timestamp = int(time.time() if now is None else now)
    entries = " ".join(f"v1,{_v1(key, message_id, timestamp, body)}" for key in keys(secret))
    return {ID_HEADER: message_id, TIMESTAMP_HEADER: str(timestamp), SIGNATURE_HEADER: entries}


def signature_headers(secret: str, message_id: str) -> Callable[[bytes], dict[str, str]]:
    """A ``sign`` callback for ``relay.http.post_json``: the headers for the bytes it sends, signed
    when it sends them (a retry is signed anew, under the same id)."""
    keys(secret)  # now, so a missing or malformed secret fails at wiring rather than at the first notice
    _check_id(message_id)

    def headers(body: bytes) -> dict[str, str]:
        return sign(secret, message_id, body)

    return headers


def verify(
    secret: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
) -> int:
    """The notice's timestamp when `headers` (any case) sign `body` with a key of `secret` within the
    tolerance; raises ``SignatureError`` saying why otherwise."""
    candidate_keys = keys(secret)
    message_id, timestamp, candidates = _parse({k.lower(): v for k, v in headers.items()})
    # Every pair is compared (no early exit), so the time taken does not say which entry matched.
    matched = False
    for key in candidate_keys:
        expected = _v1(key, message_id, timestamp, body)
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
            f"{TIMESTAMP_HEADER} {timestamp} is {int(current - timestamp)} s old, more than the "
            f"{tolerance_seconds} s tolerance: a replayed notice; reject it (or check this host's clock)."
        )
    if timestamp - current > tolerance_seconds:
        raise SignatureError(
            f"{TIMESTAMP_HEADER} {timestamp} is {int(timestamp - current)} s in the future, more "
            f"than the {tolerance_seconds} s tolerance; reject the notice and check the clocks."
        )
    return timestamp


def _parse(headers: Mapping[str, str]) -> tuple[str, int, list[str]]:
    message_id, stamp, signature = (headers.get(h) for h in (ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER))
    if not signature or not signature.strip():
        raise SignatureError(
            f"no {SIGNATURE_HEADER} header: the notice is unsigned; reject it (Relay signs every notice)."
        )
    if not message_id or not _MESSAGE_ID.fullmatch(message_id):
        raise SignatureError(
            f"{ID_HEADER} is missing or malformed: 1 to 256 letters, digits, '_', ':' or '-' (no '.')."
        )
    if not stamp or not _TIMESTAMP.fullmatch(stamp):
        raise SignatureError(f"{TIMESTAMP_HEADER} is missing or malformed: Unix seconds, digits only.")
    if len(signature) > MAX_SIGNATURE_HEADER_CHARS:
        raise SignatureError(
            f"{SIGNATURE_HEADER} is {len(signature)} characters, more than {MAX_SIGNATURE_HEADER_CHARS}."
        )
    entries = signature.split()
    if len(entries) > MAX_SIGNATURE_ENTRIES:
        raise SignatureError(
            f"{SIGNATURE_HEADER} has {len(entries)} entries, more than {MAX_SIGNATURE_ENTRIES}."
        )
    candidates = []
    for entry in entries:
        version, sep, value = entry.partition(",")
        if not sep:
            raise SignatureError(
                f"{SIGNATURE_HEADER} is malformed: {entry[:20]!r} is not <version>,<signature>; expected "
                "v1,<base64 HMAC-SHA256>, space-separated."
            )
        if version != "v1":
            continue  # another scheme (v1a, asymmetric): not this receiver's
        if not _BASE64_SHA256.fullmatch(value):
            raise SignatureError(
                f"{SIGNATURE_HEADER} is malformed: a v1 entry is not the base64 of 32 bytes (an HMAC-SHA256)."
            )
        candidates.append(value)
    if not candidates:
        raise SignatureError(
            f"{SIGNATURE_HEADER} has no v1 signature (the only scheme this receiver knows); reject it."
        )
    return message_id, int(stamp), candidates
