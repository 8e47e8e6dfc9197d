"""relay.signing: a completion notice's Relay-Signature proves it came from Relay, unchanged and
recently; anything else is refused with the reason."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from relay.signing import SIGNATURE_HEADER, SignatureError, sign, signature_headers, verify

SECRET = "whsec-test-1"
NOW = 1_718_000_000.0
BODY = json.dumps({"operationId": "op-1", "status": "COMPLETED"}, separators=(",", ":")).encode()


def test_a_signed_body_verifies_and_gives_back_its_timestamp() -> None:
    header = sign(SECRET, BODY, now=NOW)

    assert verify(SECRET, BODY, header, now=NOW + 10) == int(NOW)


def test_the_header_is_t_and_v1_an_hmac_sha256_over_timestamp_dot_body() -> None:
    # The documented scheme, computed independently, so a receiver following the docstring agrees.
    expected = hmac.new(SECRET.encode(), f"{int(NOW)}.".encode() + BODY, hashlib.sha256).hexdigest()

    assert sign(SECRET, BODY, now=NOW) == f"t={int(NOW)},v1={expected}"


def test_signature_headers_signs_the_bytes_it_is_given_at_the_current_time() -> None:
    headers = signature_headers(SECRET)(BODY)

    assert list(headers) == [SIGNATURE_HEADER] == ["Relay-Signature"]
    assert verify(SECRET, BODY, headers[SIGNATURE_HEADER]) > 0


def test_a_tampered_body_is_refused() -> None:
    header = sign(SECRET, BODY, now=NOW)
    tampered = BODY.replace(b"COMPLETED", b"FAILED")

    with pytest.raises(SignatureError, match="does not match the body"):
        verify(SECRET, tampered, header, now=NOW)


def test_a_body_signed_with_another_secret_is_refused() -> None:
    header = sign("whsec-someone-else", BODY, now=NOW)

    with pytest.raises(SignatureError, match="does not match the body"):
        verify(SECRET, BODY, header, now=NOW)


def test_the_signature_covers_the_exact_bytes_not_the_json_they_encode() -> None:
    header = sign(SECRET, BODY, now=NOW)
    same_json_other_spacing = json.dumps(json.loads(BODY)).encode()

    assert same_json_other_spacing != BODY and json.loads(same_json_other_spacing) == json.loads(BODY)
    with pytest.raises(SignatureError, match="does not match the body"):
        verify(SECRET, same_json_other_spacing, header, now=NOW)


def test_a_timestamp_older_than_the_tolerance_is_refused_as_a_replay() -> None:
    header = sign(SECRET, BODY, now=NOW)

    assert verify(SECRET, BODY, header, now=NOW + 300) == int(NOW)  # the boundary is still inside
    with pytest.raises(SignatureError, match=r"301 s old.*replayed"):
        verify(SECRET, BODY, header, now=NOW + 301)


def test_a_timestamp_beyond_the_tolerance_in_the_future_is_refused() -> None:
    header = sign(SECRET, BODY, now=NOW + 301)

    with pytest.raises(SignatureError, match="301 s in the future"):
        verify(SECRET, BODY, header, now=NOW)


def test_the_tolerance_can_be_narrowed() -> None:
    header = sign(SECRET, BODY, now=NOW)

    with pytest.raises(SignatureError, match="31 s old"):
        verify(SECRET, BODY, header, tolerance_seconds=30, now=NOW + 31)


def test_a_stale_header_with_a_wrong_signature_is_a_mismatch_not_a_replay() -> None:
    # "replay" is said only of a notice Relay really signed; a forgery is a forgery whatever its t.
    forged = sign("whsec-someone-else", BODY, now=NOW - 3600)

    with pytest.raises(SignatureError, match="does not match the body"):
        verify(SECRET, BODY, forged, now=NOW)


@pytest.mark.parametrize("header", [None, "", "   "])
def test_a_missing_header_is_refused_as_unsigned(header: str | None) -> None:
    with pytest.raises(SignatureError, match="no Relay-Signature header"):
        verify(SECRET, BODY, header, now=NOW)


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        ("garbage", "is not name=value"),
        ("v1=" + "a" * 64, "no t="),
        ("t=abc,v1=" + "a" * 64, "exactly one t="),
        ("t=+1718000000,v1=" + "a" * 64, "exactly one t="),
        ("t=1718000000,t=1718000001,v1=" + "a" * 64, "exactly one t="),
        ("t=1718000000", "no v1 signature"),
        ("t=1718000000,v0=" + "a" * 64, "no v1 signature"),
        ("t=1718000000,v1=nothex", "not 64 lowercase hex"),
        ("t=1718000000,v1=" + "A" * 64, "not 64 lowercase hex"),
    ],
)
def test_a_malformed_header_is_refused_saying_what_is_wrong(header: str, reason: str) -> None:
    with pytest.raises(SignatureError, match=reason):
        verify(SECRET, BODY, header, now=NOW)


def test_while_a_secret_rotates_any_matching_v1_entry_is_enough() -> None:
    t = int(NOW)
    new = sign("whsec-new", BODY, now=NOW).split(",v1=")[1]
    old = sign(SECRET, BODY, now=NOW).split(",v1=")[1]
    header = f"t={t},v1={new},v1={old}"

    assert verify(SECRET, BODY, header, now=NOW) == t
    assert verify("whsec-new", BODY, header, now=NOW) == t
    with pytest.raises(SignatureError, match="does not match the body"):
        verify("whsec-retired", BODY, header, now=NOW)


def test_entries_of_unknown_schemes_are_ignored_and_spaces_around_entries_tolerated() -> None:
    v1 = sign(SECRET, BODY, now=NOW).split(",v1=")[1]

    assert verify(SECRET, BODY, f"t={int(NOW)}, v2=future-scheme, v1={v1}", now=NOW) == int(NOW)


def test_an_empty_secret_is_refused_before_anything_is_signed_or_trusted() -> None:
    # An HMAC keyed with "" is one anybody can compute.
    with pytest.raises(ValueError, match="signing secret is empty"):
        sign("", BODY)
    with pytest.raises(ValueError, match="signing secret is empty"):
        signature_headers("")
    with pytest.raises(ValueError, match="signing secret is empty"):
        verify("", BODY, sign(SECRET, BODY))
