"""relay.signing: a completion notice signed as a Standard Webhook proves it came from Relay, unchanged
and recently; the `standardwebhooks` library (what a receiver installs) agrees with Relay on every
verdict; anything else is refused with the reason."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from datetime import UTC, datetime

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from relay.signing import (
    ID_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    SignatureError,
    keys,
    sign,
    signature_headers,
    verify,
)

KEY = bytes(range(32))
SECRET = "whsec_" + base64.b64encode(KEY).decode()
OTHER = "whsec_" + base64.b64encode(b"k" * 32).decode()
MSG = "0b6c1f0e-0000-4000-8000-000000000001:notice"
NOW = 1_718_000_000.0
BODY = json.dumps({"operationId": "op-1", "status": "COMPLETED"}, separators=(",", ":")).encode()


def test_a_signed_body_verifies_and_gives_back_its_timestamp() -> None:
    headers = sign(SECRET, MSG, BODY, now=NOW)

    assert verify(SECRET, BODY, headers, now=NOW + 10) == int(NOW)


def test_the_headers_are_the_standard_webhooks_three_v1_an_hmac_sha256_over_id_timestamp_body() -> None:
    # The format's scheme, computed independently, so a receiver following the spec agrees.
    digest = hmac.new(KEY, f"{MSG}.{int(NOW)}.".encode() + BODY, hashlib.sha256).digest()

    assert sign(SECRET, MSG, BODY, now=NOW) == {
        ID_HEADER: MSG,
        TIMESTAMP_HEADER: str(int(NOW)),
        SIGNATURE_HEADER: "v1," + base64.b64encode(digest).decode(),
    }
    assert (ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER) == (
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
    )


def test_the_standardwebhooks_library_verifies_what_relay_signs() -> None:
    headers = signature_headers(SECRET, MSG)(BODY)

    assert Webhook(SECRET).verify(BODY, headers) == json.loads(BODY)
    assert verify(SECRET, BODY, headers) > 0


def test_relay_verifies_what_the_standardwebhooks_library_signs() -> None:
    at = datetime.fromtimestamp(NOW, UTC)
    headers = {
        ID_HEADER: MSG,
        TIMESTAMP_HEADER: str(int(NOW)),
        SIGNATURE_HEADER: Webhook(SECRET).sign(MSG, at, BODY),
    }

    assert verify(SECRET, BODY, headers, now=NOW) == int(NOW)


def test_the_library_refuses_a_tampered_body_another_secret_and_a_stale_timestamp() -> None:
    headers = signature_headers(SECRET, MSG)(BODY)
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        Webhook(SECRET).verify(BODY.replace(b"COMPLETED", b"FAILED"), headers)
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        Webhook(OTHER).verify(BODY, headers)
    stale = sign(SECRET, MSG, BODY, now=time.time() - 301)
    with pytest.raises(WebhookVerificationError, match="too old"):
        Webhook(SECRET).verify(BODY, stale)


def test_a_bare_base64_secret_is_the_same_key_as_its_whsec_form() -> None:
    # CloudFormation generates 64 letters and digits: the base64 of 48 bytes, handed out as whsec_<it>.
    generated = "A1b2C3d4" * 8

    assert keys(generated) == keys("whsec_" + generated) and len(keys(generated)[0]) == 48
    headers = sign(generated, MSG, BODY)
    assert Webhook("whsec_" + generated).verify(BODY, headers) == json.loads(BODY)


def test_a_tampered_body_is_refused() -> None:
    headers = sign(SECRET, MSG, BODY, now=NOW)

    with pytest.raises(SignatureError, match="does not match the body"):
        verify(SECRET, BODY.replace(b"COMPLETED", b"FAILED"), headers, now=NOW)


def test_another_id_is_refused_the_id_is_signed() -> None:
    headers = {**sign(SECRET, MSG, BODY, now=NOW), ID_HEADER: "op-2:notice"}

    with pytest.raises(SignatureError, match="does not match the body"):
        verify(SECRET, BODY, headers, now=NOW)


def test_a_body_signed_with_another_secret_is_refused() -> None:
    with pytest.raises(SignatureError, match="does not match the body"):
        verify(SECRET, BODY, sign(OTHER, MSG, BODY, now=NOW), now=NOW)


def test_the_signature_covers_the_exact_bytes_not_the_json_they_encode() -> None:
    headers = sign(SECRET, MSG, BODY, now=NOW)
    same_json_other_spacing = json.dumps(json.loads(BODY)).encode()

    assert same_json_other_spacing != BODY and json.loads(same_json_other_spacing) == json.loads(BODY)
    with pytest.raises(SignatureError, match="does not match the body"):
        verify(SECRET, same_json_other_spacing, headers, now=NOW)


def test_a_timestamp_older_than_the_tolerance_is_refused_as_a_replay() -> None:
    headers = sign(SECRET, MSG, BODY, now=NOW)

    assert verify(SECRET, BODY, headers, now=NOW + 300) == int(NOW)  # the boundary is still inside
    with pytest.raises(SignatureError, match=r"301 s old.*replayed"):
        verify(SECRET, BODY, headers, now=NOW + 301)


def test_a_timestamp_beyond_the_tolerance_in_the_future_is_refused() -> None:
    with pytest.raises(SignatureError, match="301 s in the future"):
        verify(SECRET, BODY, sign(SECRET, MSG, BODY, now=NOW + 301), now=NOW)


def test_the_tolerance_can_be_narrowed() -> None:
    with pytest.raises(SignatureError, match="31 s old"):
        verify(SECRET, BODY, sign(SECRET, MSG, BODY, now=NOW), tolerance_seconds=30, now=NOW + 31)


def test_a_stale_notice_with_a_wrong_signature_is_a_mismatch_not_a_replay() -> None:
    # "replay" is said only of a notice Relay really signed; a forgery is a forgery whatever its time.
    with pytest.raises(SignatureError, match="does not match the body"):
        verify(SECRET, BODY, sign(OTHER, MSG, BODY, now=NOW - 3600), now=NOW)


def test_headers_are_read_in_any_case() -> None:
    headers = {k.title(): v for k, v in sign(SECRET, MSG, BODY, now=NOW).items()}

    assert verify(SECRET, BODY, headers, now=NOW) == int(NOW)


@pytest.mark.parametrize("signature", [None, "", "   "])
def test_a_missing_signature_is_refused_as_unsigned(signature: str | None) -> None:
    headers = {ID_HEADER: MSG, TIMESTAMP_HEADER: str(int(NOW))}
    if signature is not None:
        headers[SIGNATURE_HEADER] = signature
    with pytest.raises(SignatureError, match="no webhook-signature header"):
        verify(SECRET, BODY, headers, now=NOW)


V1 = "v1," + "A" * 43 + "="


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({ID_HEADER: ""}, "webhook-id is missing or malformed"),
        ({ID_HEADER: "op.1"}, "webhook-id is missing or malformed"),
        ({ID_HEADER: "x" * 257}, "webhook-id is missing or malformed"),
        ({TIMESTAMP_HEADER: "abc"}, "webhook-timestamp is missing or malformed"),
        ({TIMESTAMP_HEADER: "+1718000000"}, "webhook-timestamp is missing or malformed"),
        ({TIMESTAMP_HEADER: "1" * 13}, "webhook-timestamp is missing or malformed"),
        ({SIGNATURE_HEADER: "garbage"}, "is not <version>,<signature>"),
        ({SIGNATURE_HEADER: "v1a,abc"}, "no v1 signature"),
        ({SIGNATURE_HEADER: "v1,nothex"}, "not the base64 of 32 bytes"),
        ({SIGNATURE_HEADER: " ".join([V1] * 9)}, "9 entries, more than 8"),
        ({SIGNATURE_HEADER: "v1a," + "A" * 1100}, "more than 1024"),
    ],
)
def test_a_malformed_header_is_refused_saying_what_is_wrong(change: dict[str, str], reason: str) -> None:
    headers = {**sign(SECRET, MSG, BODY, now=NOW), **change}
    with pytest.raises(SignatureError, match=reason):
        verify(SECRET, BODY, headers, now=NOW)


def test_while_a_secret_rotates_the_notice_carries_one_entry_per_secret_and_any_matches() -> None:
    rotating = f"{OTHER} {SECRET}"  # the new one first, the old one still signing
    headers = sign(rotating, MSG, BODY, now=NOW)

    assert len(headers[SIGNATURE_HEADER].split(" ")) == 2
    assert verify(SECRET, BODY, headers, now=NOW) == int(NOW)
    assert verify(OTHER, BODY, headers, now=NOW) == int(NOW)
    with pytest.raises(SignatureError, match="does not match the body"):
        verify("whsec_" + base64.b64encode(b"r" * 32).decode(), BODY, headers, now=NOW)


def test_entries_of_other_schemes_are_ignored() -> None:
    headers = sign(SECRET, MSG, BODY, now=NOW)
    headers[SIGNATURE_HEADER] = "v1a,c29tZSBhc3ltbWV0cmljIHNpZ25hdHVyZQ== " + headers[SIGNATURE_HEADER]

    assert verify(SECRET, BODY, headers, now=NOW) == int(NOW)


@pytest.mark.parametrize(
    ("secret", "reason"),
    [
        ("", "signing secret is empty"),
        ("   ", "signing secret is empty"),
        ("whsec_not*base64", "not whsec_ followed by base64"),
        ("whsec_" + base64.b64encode(b"short").decode(), "5 bytes"),
        ("whsec_" + base64.b64encode(b"x" * 65).decode(), "65 bytes"),
    ],
)
def test_an_empty_short_or_malformed_secret_is_refused_before_anything_is_signed_or_trusted(
    secret: str, reason: str
) -> None:
    # An HMAC keyed with "" (or a few bytes) is one anybody can compute.
    with pytest.raises(ValueError, match=reason):
        sign(secret, MSG, BODY)
    with pytest.raises(ValueError, match=reason):
        signature_headers(secret, MSG)
    with pytest.raises(ValueError, match=reason):
        verify(secret, BODY, sign(SECRET, MSG, BODY))


def test_an_id_that_would_change_what_is_signed_is_refused_when_signing() -> None:
    with pytest.raises(ValueError, match=r"no '\.'"):
        sign(SECRET, "op.1", BODY)
