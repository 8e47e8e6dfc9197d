"""relay.api.screen_body: the body an HTTP API cannot read gets its 4xx here, before any resolver parses
it; what passes reaches the resolver as plain JSON text."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from relay import api


def event(
    body: str | None, *, method: str = "POST", base64_encoded: bool = False, **headers: str
) -> dict[str, Any]:
    return {
        "version": "2.0",
        "headers": {"content-type": "application/json", **headers},
        "requestContext": {"http": {"method": method, "path": "/x"}},
        "body": body,
        "isBase64Encoded": base64_encoded,
    }


def test_a_base64_body_reaches_the_resolver_as_the_json_text_it_encodes() -> None:
    text = json.dumps({"amount": "12.50", "name": "Zoë"})
    encoded = base64.b64encode(text.encode()).decode()

    refused, screened = api.screen_body(event(encoded, base64_encoded=True), max_body_bytes=1000)

    assert refused is None
    assert (screened["body"], screened["isBase64Encoded"]) == (text, False)
    assert screened["headers"]["content-type"] == "application/json"


def test_the_media_type_reaches_the_resolver_in_the_form_it_matches() -> None:
    refused, screened = api.screen_body(
        event("{}", **{"content-type": "Application/JSON; Charset=UTF-8"}), max_body_bytes=1000
    )

    assert refused is None and screened["headers"]["content-type"] == "application/json"


@pytest.mark.parametrize("method", ["GET", "DELETE", "HEAD"])
def test_a_body_on_a_method_that_carries_none_is_left_alone(method: str) -> None:
    original = event("\x00 not json", method=method, **{"content-type": "image/png"})

    refused, screened = api.screen_body(original, max_body_bytes=1000)

    assert refused is None and screened is original


def test_size_is_checked_first_and_on_the_decoded_bytes() -> None:
    fits = base64.b64encode(b"[" + b" " * 997 + b"]").decode()  # 999 bytes, 1,332 characters
    too_big = base64.b64encode(b"x" * 1001).decode()

    assert api.screen_body(event(fits, base64_encoded=True), max_body_bytes=1000)[0] is None
    refused, _ = api.screen_body(
        event(too_big, base64_encoded=True, **{"content-type": "image/png"}), max_body_bytes=1000
    )
    assert refused is not None and refused["statusCode"] == 413


def test_refusals_name_the_rule_in_the_apis_error_shape() -> None:
    refused, _ = api.screen_body(event("[" * 50 + "]" * 50), max_body_bytes=1000)

    assert refused is not None and refused["statusCode"] == 400
    body = json.loads(refused["body"])
    assert body["error"] == "ValidationError"
    assert body["fields"] == [{"field": "body", "message": "is JSON nested deeper than 32 levels"}]
