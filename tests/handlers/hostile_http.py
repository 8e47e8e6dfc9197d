"""Request bodies an HTTP API cannot read, as payload 2.0 event fields, with the 4xx each must get.

Shared by the payments, orders and scores API tests: every POST route answers these the same way
(relay.api screens the body before the resolver sees it), never with a 5xx.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import pytest


def hostile_bodies(valid: Mapping[str, Any], *, max_body_bytes: int) -> list[Any]:
    """``pytest.param((event fields, status, error), id=...)`` per hostile body; ``valid`` is a body the
    route accepts, used where the hostility is only in the encoding."""
    text = json.dumps(valid)

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    def case(
        id_: str, body: str, status: int, error: str, *, base64_encoded: bool = False, **headers: str
    ) -> Any:
        fields = {"body": body, "isBase64Encoded": base64_encoded}
        return pytest.param((fields, {"content-type": "application/json", **headers}, status, error), id=id_)

    deep = text[:-1] + ', "deep": ' + "[" * 40 + "]" * 40 + "}"
    return [
        case("not UTF-8 (base64)", b64(b'{"a": "\xff\xfe"}'), 400, "ValidationError", base64_encoded=True),
        case(
            "not UTF-8, valid JSON around it",
            b64(text.encode()[:-1] + b', "x": "\xc3"}'),
            400,
            "ValidationError",
            base64_encoded=True,
        ),
        case("a raw lone surrogate", text[:-1] + ', "x": "\ud800"}', 400, "ValidationError"),
        case("an escaped lone surrogate", text[:-1] + ', "x": "\\udfff"}', 400, "ValidationError"),
        case(
            "isBase64Encoded but not base64",
            "%%% not base64 %%%",
            400,
            "ValidationError",
            base64_encoded=True,
        ),
        case("not JSON", "{not json", 400, "ValidationError"),
        # Within the size limit, far deeper than the interpreter's recursion limit (RecursionError).
        case("nested beyond recursion", "[" * min(100_000, max_body_bytes), 400, "ValidationError"),
        case("nested 41 deep", deep, 400, "ValidationError"),
        case("NaN", text[:-1] + ', "x": NaN}', 400, "ValidationError"),
        case("a 5,000-digit number", text[:-1] + ', "x": ' + "9" * 5000 + "}", 400, "ValidationError"),
        case("text/plain", text, 415, "UnsupportedMediaType", **{"content-type": "text/plain"}),
        case(
            "a form",
            "a=1&b=2",
            415,
            "UnsupportedMediaType",
            **{"content-type": "application/x-www-form-urlencoded"},
        ),
        case(
            "multipart without a boundary",
            text,
            415,
            "UnsupportedMediaType",
            **{"content-type": "multipart/form-data"},
        ),
        case(
            "JSON in latin-1",
            text,
            415,
            "UnsupportedMediaType",
            **{"content-type": "application/json; charset=latin-1"},
        ),
        case("over the size limit", " " * (max_body_bytes + 1), 413, "PayloadTooLarge"),
        case(
            "over the size limit, base64",
            b64(b" " * (max_body_bytes + 1)),
            413,
            "PayloadTooLarge",
            base64_encoded=True,
        ),
    ]


def readable_encodings(valid: Mapping[str, Any]) -> list[Any]:
    """The same valid body as API Gateway may deliver it: each must be accepted like the plain one."""
    text = json.dumps(valid)
    return [
        pytest.param(({"body": text, "isBase64Encoded": False}, {}), id="plain"),
        pytest.param(
            ({"body": base64.b64encode(text.encode()).decode(), "isBase64Encoded": True}, {}), id="base64"
        ),
        pytest.param(
            ({"body": text, "isBase64Encoded": False}, {"content-type": None}), id="no content-type"
        ),
        pytest.param(
            ({"body": text, "isBase64Encoded": False}, {"content-type": "Application/JSON; Charset=UTF-8"}),
            id="content-type with a charset",
        ),
    ]


def with_body(
    event: dict[str, Any], fields: Mapping[str, Any], headers: Mapping[str, str | None]
) -> dict[str, Any]:
    """``event`` with the body fields and headers replaced (``None`` removes a header)."""
    merged = {**event.get("headers", {}), **headers}
    return {**event, **fields, "headers": {k: v for k, v in merged.items() if v is not None}}


def assert_refused(response: Mapping[str, Any], status: int, error: str) -> None:
    assert response["statusCode"] == status, response
    body = json.loads(response["body"])
    assert body["error"] == error, body
    if status == 400:
        assert [f["field"] for f in body["fields"]] == ["body"], body
