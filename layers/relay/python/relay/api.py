"""What every HTTP API handler (Powertools ``APIGatewayHttpResolver``) does the same way.

* ``resolve``: the Lambda entry point's one call. Before the resolver sees the request it refuses, with
  a 4xx and never a 5xx, every body the API cannot read: over the size limit (413), not JSON by its
  Content-Type (415), not valid base64 when ``isBase64Encoded``, not UTF-8, not JSON, nested deeper than
  ``MAX_BODY_DEPTH``, or holding what ``relay.untrusted_json`` refuses (400, field ``body``). What
  passes reaches Powertools as plain JSON text, so its parser never meets hostile bytes;
* ``field_errors``: a ``RequestValidationError`` as ``(field, message)`` pairs for a 400 body
  (``("body", "items", 0, "quantity")`` -> ``items.0.quantity``);
* ``payload_too_large``: the 413 answer;
* ``openapi_document``: the resolver's OpenAPI document as checked in, without Powertools' default
  ``422 HTTPValidationError`` entries (these APIs answer validation errors with 400);
* ``HttpApi``: one service's API put together from the above -- the resolver, its error answers, its
  Lambda entry point and its document -- so a handler module holds only its routes.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from relay import untrusted_json

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
    from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from relay.errors import InvalidInput

_JSON = "application/json"
_POWERTOOLS_422 = "#/components/schemas/HTTPValidationError"
# DynamoDB's own limit for nested maps and lists: a body this API stores can never be deeper than that.
MAX_BODY_DEPTH = 32
# Methods whose body the APIs read; a body sent with GET is not read, so not screened.
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def resolve(app: Any, event: dict[str, Any], context: Any, *, max_body_bytes: int) -> dict[str, Any]:
    """``app.resolve(event, context)`` for a request whose body this API can read; a 4xx otherwise."""
    refused, event = screen_body(event, max_body_bytes=max_body_bytes)
    if refused is not None:
        return refused
    answer: dict[str, Any] = app.resolve(decoded_path(event), context)
    return answer


def answer_unmatched_paths(app: Any) -> None:
    """A request API Gateway routed here whose path the resolver cannot match (a decoded parameter with
    a character outside Powertools' pattern, say) is a 404 in the documents' error shape, not
    Powertools' own ``{"statusCode", "message"}``."""
    from aws_lambda_powertools.event_handler import Response

    @app.not_found  # type: ignore[untyped-decorator]
    def _not_found(_exc: Exception) -> Response[str]:
        event = app.current_event
        body = {"error": "NotFound", "message": f"nothing at {event.http_method} {event.path}"}
        return Response(404, content_type=_JSON, body=json.dumps(body))


def decoded_path(event: dict[str, Any]) -> dict[str, Any]:
    """The event with ``rawPath`` percent-decoded. Powertools matches routes and takes path parameters
    from ``rawPath``, which API Gateway passes as the client sent it; the OpenAPI document describes the
    parameters decoded (a 15-character id sent as 80 percent-encoded bytes must not fail maxLength 64)."""
    raw = event.get("rawPath")
    if isinstance(raw, str) and "%" in raw:
        return {**event, "rawPath": unquote(raw)}
    return event


def screen_body(
    event: dict[str, Any], *, max_body_bytes: int
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """``(answer, event)``: the 4xx answer for a body this API cannot read, or ``None`` and the event
    with its body as plain JSON text (``isBase64Encoded`` false)."""
    body = event.get("body")
    if body is None or body == "":
        return None, event
    if not isinstance(body, str):
        return _unreadable("is not text"), event
    raw: bytes | None = None
    if event.get("isBase64Encoded"):
        try:
            raw = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            return _unreadable("is marked base64-encoded (isBase64Encoded) but is not base64"), event
        size = len(raw)
    else:
        size = len(body.encode("utf-8", errors="surrogatepass"))
    if size > max_body_bytes:
        return payload_too_large(max_body_bytes), event
    method = str(((event.get("requestContext") or {}).get("http") or {}).get("method", "")).upper()
    if method not in _BODY_METHODS:
        return None, event
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    refused = _unsupported_media_type(headers.get("content-type"))
    if refused is not None:
        return refused, event
    try:
        untrusted_json.loads(raw if raw is not None else body, what="the body", max_depth=MAX_BODY_DEPTH)
    except InvalidInput as exc:
        return _unreadable(str(exc).removeprefix("the body ")), event
    # What Powertools then reads: plain text, and the media type as it matches it (case-sensitively).
    headers["content-type"] = _JSON
    text = raw.decode("utf-8") if raw is not None else body
    return None, {**event, "headers": headers, "body": text, "isBase64Encoded": False}


def _unsupported_media_type(content_type: str | None) -> dict[str, Any] | None:
    # No Content-Type is read as JSON, as Powertools does (API Gateway then delivers it base64-encoded).
    if content_type is None or not content_type.strip():
        return None
    media_type, *params = (part.strip() for part in content_type.split(";"))
    charset = next(
        (p.split("=", 1)[1].strip().strip('"') for p in params if p.lower().startswith("charset=")), None
    )
    if media_type.lower() == _JSON and (charset is None or charset.lower() in ("utf-8", "utf8")):
        return None
    shown = content_type.strip()[:100]
    message = f"the body must be {_JSON} (UTF-8), not {shown!r}; nothing was done"
    return _answer(415, "UnsupportedMediaType", message)


def _unreadable(reason: str) -> dict[str, Any]:
    fields = [{"field": "body", "message": reason}]
    return _answer(400, "ValidationError", f"the body {reason}; nothing was done", fields)


def _answer(
    status: int, error: str, message: str, fields: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"error": error, "message": message}
    if fields:
        body["fields"] = fields
    return {
        "statusCode": status,
        "headers": {"Content-Type": _JSON},
        "body": json.dumps(body),
        "isBase64Encoded": False,
    }


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


def payload_too_large(limit: int) -> dict[str, Any]:
    """The 413 answer (API Gateway payload 2.0), in the APIs' error shape."""
    return _answer(413, "PayloadTooLarge", f"the body is larger than {limit} bytes; nothing was stored")


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


class ErrorAnswers:
    """The error answers of one API, all in its error model (``{"error", "message", "fields"}``):

    * a ``RequestValidationError`` -> 400 ``ValidationError`` with field errors ("...; nothing was
      stored" -- ``not_done`` says what was not done);
    * a ``TransientError`` (a dependency throttled, timed out, failed) -> 503 with ``Retry-After``;
    * each exception registered with ``answer`` -> its status and error code, its message as ``message``.

    ``doc`` describes a response for the OpenAPI document in the same model."""

    def __init__(
        self,
        app: Any,
        *,
        model: Any,
        field_model: Any,
        not_done: str = "nothing was stored",
        unqualified: Collection[str] = ("body",),
        strip_value_error: bool = False,
    ) -> None:
        from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

        from relay.errors import TransientError
        from relay.observability import logger

        self.app = app
        self.model = model
        self.field_model = field_model
        self.not_done = not_done

        def invalid(exc: RequestValidationError) -> Any:
            pairs = field_errors(exc.errors(), unqualified=unqualified, strip_value_error=strip_value_error)
            fields = [field_model(field=field, message=message) for field, message in pairs]
            return self.response(400, "ValidationError", f"the request is invalid; {not_done}", fields)

        def unavailable(exc: TransientError) -> Any:
            logger().warning("dependency unavailable", extra={"error": str(exc)})
            retry = {"Retry-After": "1"}
            return self.response(
                503, "ServiceUnavailable", "a dependency is unavailable; retry later", headers=retry
            )

        app.exception_handler(RequestValidationError)(invalid)
        app.exception_handler(TransientError)(unavailable)

    def response(
        self,
        status: int,
        error: str,
        message: str,
        fields: list[Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response[dict[str, Any]]:
        from aws_lambda_powertools.event_handler import Response

        body = self.model(error=error, message=message, fields=fields).to_json_dict()
        return Response(status_code=status, content_type=_JSON, body=body, headers=headers)

    def invalid_field(self, field: str, message: str) -> Response[dict[str, Any]]:
        """The 400 of a field the model accepted but a later check refused (the same shape as a
        validation error: a client cannot tell, and needs not)."""
        fields = [self.field_model(field=field, message=message)]
        return self.response(400, "ValidationError", f"the request is invalid; {self.not_done}", fields)

    def answer(self, exception: type[Exception], status: int, error: str) -> None:
        """Answer ``exception`` with ``status`` and ``error``; its text is the message (logged too: a
        refusal the client may not report is still visible to operators)."""

        def answered(exc: Exception) -> Response[dict[str, Any]]:
            from relay.observability import logger

            logger().warning("request refused", extra={"status": status, "error": error, "reason": str(exc)})
            return self.response(status, error, str(exc))

        self.app.exception_handler(exception)(answered)

    def body_docs(
        self, *, too_large: str, invalid: str = "Invalid request", not_done: str = "nothing stored"
    ) -> dict[int, OpenAPIResponse]:
        """The answers of a route that reads a JSON body (``screen_body`` and validation)."""
        return {
            400: self.doc(f"{invalid}: field-level errors (field `body` when it is not JSON), {not_done}"),
            413: self.doc(too_large),
            415: self.doc("Body that is not application/json (UTF-8)"),
        }

    def keyed_docs(self) -> dict[int, OpenAPIResponse]:
        """The answers of a POST made safe to retry by an Idempotency-Key (``relay.request_keys``)."""
        return {
            422: self.doc("Idempotency-Key already used with a different body"),
            503: self.doc("A dependency is unavailable; retry (with the same Idempotency-Key)"),
        }

    def read_docs(
        self, what: str, model: Any, *, invalid: str = "", unmatched: str = ""
    ) -> dict[int, OpenAPIResponse]:
        """The answers of a route that reads one ``what``: 200 in ``model``; 400 for an invalid id (or
        ``invalid``); 404 when there is none, or (``unmatched``: what the id is) when the router cannot
        match an id with a pattern -- API Gateway passes the path on."""
        missing = f"{unmatched} the router cannot match (a character outside the id's pattern)"
        return {
            200: self.doc(f"The {what}", model),
            400: self.doc(invalid or f"Invalid {what} id"),
            404: self.doc(missing if unmatched else f"No {what} with this id"),
        }

    def found(self, view: Any, error: str, message: str) -> Response[dict[str, Any]]:
        """200 with ``view``, or 404 ``error`` when there is none."""
        return self.response(404, error, message) if view is None else json_response(200, view)

    def doc(self, description: str, model: Any = None) -> OpenAPIResponse:
        """An OpenAPI response: ``description``, in ``model`` (the error model by default)."""
        return {"description": description, "content": {_JSON: {"model": model or self.model}}}


LambdaHandler = Callable[[dict[str, Any], Any], dict[str, Any]]


def lambda_handler(app: Any, *, max_body_bytes: Callable[[], int]) -> LambdaHandler:
    """The API's Lambda entry point: Powertools logging with the Lambda context and the request's
    correlation id, tracing annotated with the correlation id its events carry (``correlation_id``:
    the caller's ``x-correlation-id``, else API Gateway's request id), then ``resolve`` -- the body
    screened before the resolver parses it: size first (a huge body must not cost a parse), then
    Content-Type, base64, UTF-8 and JSON limits, each a 4xx."""
    from aws_lambda_powertools.logging import correlation_paths

    from relay.observability import annotate_correlation_id, inject_lambda_context, trace_handler

    @inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
    @trace_handler
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        # HTTP API (payload 2.0) lower-cases header names.
        headers = event.get("headers") or {}
        request_id = (event.get("requestContext") or {}).get("requestId")
        annotate_correlation_id(headers.get("x-correlation-id") or request_id)
        return resolve(app, event, context, max_body_bytes=max_body_bytes())

    return handler


def correlation_id(app: Any) -> str:
    """The request's correlation id: the caller's ``x-correlation-id``, else API Gateway's request id."""
    event = app.current_event
    return str(event.headers.get("x-correlation-id") or event.request_context.request_id)


def idempotency_key_header() -> Any:
    """The ``Idempotency-Key`` request header parameter, as every API documents and validates it."""
    from aws_lambda_powertools.event_handler.openapi.params import Header

    return Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        pattern=r"^[\x21-\x7e]+$",
        description="Client-chosen key (printable ASCII, at most 255 characters) that makes retries safe",
    )


def caller(app: Any) -> str:
    """Who signed the request, as a stable name for what they own (their Idempotency-Keys): the IAM
    principal from ``requestContext.authorizer.iam``, with an assumed role's session name dropped (a
    client whose credentials were refreshed is still the same client), else the account, else
    ``anonymous`` (a route without IAM auth)."""
    context = app.current_event.get("requestContext") or {}
    iam = ((context.get("authorizer") or {}).get("iam")) or {}
    arn = str(iam.get("userArn") or "")
    if ":assumed-role/" in arn:
        arn = arn.rsplit("/", 1)[0]
    return arn or str(iam.get("accountId") or "") or "anonymous"


class HttpApi:
    """One service's HTTP API: the resolver (request validation on; a path it cannot match is a 404 in
    the error model), its error answers (``ErrorAnswers``: ``model`` and ``field_model``, the kernel's
    ``relay.api_models`` unless the API documents its own, and ``options``),
    its Lambda entry point (``handler``, bodies above ``max_body_bytes`` refused: a number, or read
    from the settings when called) and its checked-in
    OpenAPI document."""

    def __init__(
        self,
        title: str,
        *,
        max_body_bytes: int | Callable[[], int],
        model: Any = None,
        field_model: Any = None,
        **options: Any,
    ) -> None:
        from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

        from relay import api_models

        model, field_model = model or api_models.ErrorResponse, field_model or api_models.FieldError

        self.title = title
        self.app: APIGatewayHttpResolver = APIGatewayHttpResolver(enable_validation=True)
        answer_unmatched_paths(self.app)
        self.errors = ErrorAnswers(self.app, model=model, field_model=field_model, **options)
        limit = max_body_bytes if callable(max_body_bytes) else lambda: max_body_bytes
        self.handler = lambda_handler(self.app, max_body_bytes=limit)

    def openapi_document(self) -> str:
        """The document as checked in (``functions/<service>/openapi.json``; ``make openapi``)."""
        return openapi_document(self.app, title=self.title)

    def main(self, module: str) -> None:
        """``python -m <service>.handlers.api`` prints the document (what ``make openapi`` writes)."""
        if module == "__main__":
            print(self.openapi_document(), end="")


def json_response(status: int, view: Any, headers: dict[str, str] | None = None) -> Response[dict[str, Any]]:
    """A JSON answer of one of the API's models (``to_json_dict``: camelCase, as documented)."""
    from aws_lambda_powertools.event_handler import Response

    return Response(status_code=status, content_type=_JSON, body=view.to_json_dict(), headers=headers)
