"""HTTP API handler: ``POST /payments`` (202 + operationId) and ``GET /operations/{operationId}``.

Thin: Powertools resolver with request validation (pydantic models in ``payments.models``), the
domain in ``payments.intake``. The OpenAPI document generated from this resolver is checked in as
``functions/payments/openapi.json``; regenerate it with
``PYTHONPATH=layers/relay/python:functions python -m payments.api > functions/payments/openapi.json``.
"""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel

from payments.intake import IdempotencyKeyMismatch, accept_payment, describe_operation
from payments.models import ErrorResponse, FieldError, OperationAccepted, OperationView, PaymentRequest
from payments.runtime import runtime
from relay import api
from relay.errors import TransientError
from relay.observability import logger as relay_logger

logger = relay_logger()
app = APIGatewayHttpResolver(enable_validation=True)
api.answer_unmatched_paths(app)

_JSON = "application/json"


def _error(
    status: int,
    error: str,
    message: str,
    fields: list[FieldError] | None = None,
    headers: dict[str, str] | None = None,
) -> Response[dict[str, Any]]:
    body = ErrorResponse(error=error, message=message, fields=fields).to_json_dict()
    return Response(status_code=status, content_type=_JSON, body=body, headers=headers)


def _doc(description: str, model: type[BaseModel] = ErrorResponse) -> OpenAPIResponse:
    return {"description": description, "content": {_JSON: {"model": model}}}


@app.post(
    "/payments",
    summary="Request a payment (asynchronous)",
    description=(
        "Stores the request and answers 202 at once; poll the operation at the Location header. "
        "An Idempotency-Key makes retries safe: the same key and body return the same operation."
    ),
    responses={
        202: _doc("Accepted; processing continues asynchronously", OperationAccepted),
        400: _doc("Invalid request: field-level errors (field `body` when it is not JSON), nothing stored"),
        413: _doc("Body larger than the configured maximum"),
        415: _doc("Body that is not application/json (UTF-8)"),
        422: _doc("Idempotency-Key already used with a different body"),
        503: _doc("A dependency is unavailable; retry (with the same Idempotency-Key)"),
    },
    tags=["payments"],
)
def create_payment(
    request: Annotated[PaymentRequest, Body(embed=False)],
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            min_length=1,
            max_length=255,
            pattern=r"^[\x21-\x7e]+$",
            description="Client-chosen key (printable ASCII, at most 255 characters) that makes retries safe",
        ),
    ] = None,
) -> Response[dict[str, Any]]:
    rt = runtime()
    event = app.current_event
    correlation_id = event.headers.get("x-correlation-id") or event.request_context.request_id
    accepted = accept_payment(
        request,
        idempotency_key=idempotency_key,
        correlation_id=correlation_id,
        store=rt.store,
        s3_client=rt.s3,
        bucket=rt.bucket,
        key_ttl_days=max(rt.settings.terminal_ttl_days, rt.settings.failed_ttl_days),
    )
    logger.info(
        "payment request accepted",
        extra={"operation_id": accepted.operation_id, "replayed": accepted.replayed},
    )
    return Response(
        status_code=202,
        content_type=_JSON,
        body=OperationAccepted(operation_id=accepted.operation_id, status=accepted.status).to_json_dict(),
        headers={"Location": f"/operations/{accepted.operation_id}"},
    )


@app.get(
    "/operations/<operationId>",
    summary="Status of an operation",
    responses={
        200: _doc("The operation", OperationView),
        400: _doc("Invalid operation id"),
        404: _doc("No operation with this id"),
    },
    tags=["operations"],
)
def get_operation(
    operation_id: Annotated[str, Path(alias="operationId", min_length=1, max_length=64)],
) -> Response[dict[str, Any]]:
    view = describe_operation(runtime().store, operation_id)
    if view is None:
        return _error(404, "OperationNotFound", f"no operation {operation_id}")
    return Response(status_code=200, content_type=_JSON, body=view.to_json_dict())


@app.exception_handler(RequestValidationError)  # type: ignore[untyped-decorator]
def _invalid_request(exc: RequestValidationError) -> Response[Any]:
    # ("body", "amount") -> "amount"; ("header", "idempotency-key") stays qualified.
    pairs = api.field_errors(exc.errors())
    fields = [FieldError(field=field, message=message) for field, message in pairs]
    return _error(400, "ValidationError", "the request is invalid; nothing was stored", fields)


@app.exception_handler(IdempotencyKeyMismatch)  # type: ignore[untyped-decorator]
def _key_mismatch(exc: IdempotencyKeyMismatch) -> Response[Any]:
    return _error(422, "IdempotencyKeyMismatch", str(exc))


@app.exception_handler(TransientError)  # type: ignore[untyped-decorator]
def _unavailable(exc: TransientError) -> Response[Any]:
    logger.warning("dependency unavailable", extra={"error": str(exc)})
    return _error(
        503, "ServiceUnavailable", "a dependency is unavailable; retry later", headers={"Retry-After": "1"}
    )


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    # The body is screened before the resolver parses it: size first (a huge body must not cost a
    # parse), then Content-Type, base64, UTF-8 and JSON limits, each a 4xx (relay.api).
    return api.resolve(app, event, context, max_body_bytes=runtime().settings.max_body_bytes)


def openapi_document() -> str:
    """The OpenAPI document as checked in (stable key order, trailing newline).

    Powertools documents its default ``422 HTTPValidationError`` on every validated route; this API
    answers validation errors with 400 (and uses 422 for an Idempotency-Key reused with another
    body), so those default entries and their schemas are removed.
    """
    return api.openapi_document(app, title="Relay payments API")


if __name__ == "__main__":
    print(openapi_document(), end="")
