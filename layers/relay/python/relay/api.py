"""What every HTTP API handler (Powertools ``APIGatewayHttpResolver``) does the same way.

* ``field_errors``: a ``RequestValidationError`` as ``(field, message)`` pairs for a 400 body
  (``("body", "items", 0, "quantity")`` -> ``items.0.quantity``);
* ``body_size`` / ``payload_too_large``: the raw-body size check, done before anything parses the
  body, and its 413 answer;
* ``openapi_document``: the resolver's OpenAPI document as checked in, without Powertools' default
  ``422 HTTPValidationError`` entries (these APIs answer validation errors with 400).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

_JSON = "application/json"
_POWERTOOLS_422 = "#/components/schemas/HTTPValidationError"


def field_errors(
    errors: Sequence[Any],
    *,
    unqualified: Collection[str] = ("body",),
    strip_value_error: bool = False,
) -> list[tuple[str, str]]:
    """``(field, message)`` per validation error. Locations in ``unqualified`` lose their first part
    (``body``); others stay qualified (``header.idempotency-key``)."""
    pairs = []
    for err in errors:
        location = [str(part) for part in err.get("loc", ())]
        if location and location[0] in unqualified:
            location = location[1:]
        message = str(err.get("msg", "invalid"))
        if strip_value_error:
            message = message.removeprefix("Value error, ")
        pairs.append((".".join(location) or "body", message))
    return pairs


def body_size(event: Mapping[str, Any]) -> int:
    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        return len(base64.b64decode(body))
    return len(body.encode("utf-8"))


def payload_too_large(limit: int) -> dict[str, Any]:
    """The 413 answer (API Gateway payload 2.0), in the APIs' error shape."""
    message = f"the body is larger than {limit} bytes; nothing was stored"
    return {
        "statusCode": 413,
        "headers": {"Content-Type": _JSON},
        "body": json.dumps({"error": "PayloadTooLarge", "message": message}),
        "isBase64Encoded": False,
    }


def openapi_document(app: Any, *, title: str, version: str = "1.0.0") -> str:
    """The OpenAPI document as checked in (stable key order, trailing newline)."""
    schema = json.loads(app.get_openapi_json_schema(title=title, version=version))
    for path in schema.get("paths", {}).values():
        for operation in path.values():
            responses = operation.get("responses", {})
            for code, response in list(responses.items()):
                if _POWERTOOLS_422 in json.dumps(response):
                    del responses[code]
    components = schema.get("components", {}).get("schemas", {})
    if _POWERTOOLS_422 not in json.dumps(schema):
        components.pop("HTTPValidationError", None)
        if "#/components/schemas/ValidationError" not in json.dumps(schema):
            components.pop("ValidationError", None)
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
