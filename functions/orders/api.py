"""HTTP API handler: ``POST /orders`` (201), ``GET /orders/{orderId}``, ``POST /orders/{orderId}/cancel``.

Thin: Powertools resolver with request validation (pydantic models in ``orders.models``), the domain
in ``orders.intake``. The OpenAPI document generated from this resolver is checked in as
``functions/orders/openapi.json``; regenerate it with
``PYTHONPATH=layers/relay/python:functions python -m orders.api > functions/orders/openapi.json``.
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

from orders.intake import (
    IdempotencyKeyMismatch,
    NotCancellable,
    OrderNotFound,
    cancel_order,
    describe_order,
    order_view,
    place_order,
)
from orders.models import ErrorResponse, FieldError, OrderRequest, OrderView
from orders.runtime import runtime
from relay import api
from relay.errors import TransientError
from relay.observability import logger as relay_logger

logger = relay_logger()
app = APIGatewayHttpResolver(enable_validation=True)
api.answer_unmatched_paths(app)

_JSON = "application/json"
# An order is a few hundred bytes; anything this large is not one (checked before parsing).
MAX_BODY_BYTES = 64 * 1024
_ORDER_ID = Path(alias="orderId", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9-]+$")


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


def _order(status: int, view: OrderView, headers: dict[str, str] | None = None) -> Response[dict[str, Any]]:
    return Response(status_code=status, content_type=_JSON, body=view.to_json_dict(), headers=headers)


@app.post(
    "/orders",
    summary="Place an order",
    description=(
        "Stores the order (status CREATED) and its OrderCreated event in one transaction; inventory, "
        "notifications and analytics follow asynchronously. An Idempotency-Key makes retries safe: "
        "the same key and body return the same order (200 on a replay)."
    ),
    responses={
        201: _doc("Created; the order is at the Location header", OrderView),
        200: _doc("Replay of an earlier request with the same Idempotency-Key and body", OrderView),
        400: _doc("Invalid request: field-level errors (field `body` when it is not JSON), nothing stored"),
        413: _doc("Body larger than 64 KiB"),
        415: _doc("Body that is not application/json (UTF-8)"),
        422: _doc("Idempotency-Key already used with a different body"),
        503: _doc("A dependency is unavailable; retry (with the same Idempotency-Key)"),
    },
    tags=["orders"],
)
def create_order(
    request: Annotated[OrderRequest, Body(embed=False)],
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
    placed = place_order(
        request,
        idempotency_key=idempotency_key,
        correlation_id=correlation_id,
        store=rt.orders,
        key_ttl_days=rt.settings.request_key_ttl_days,
    )
    logger.info("order placed", extra={"order_id": placed.order.order_id, "replayed": placed.replayed})
    return _order(
        200 if placed.replayed else 201,
        order_view(placed.order),
        headers={"Location": f"/orders/{placed.order.order_id}"},
    )


@app.get(
    "/orders/<orderId>",
    summary="An order and its status history",
    responses={
        200: _doc("The order", OrderView),
        400: _doc("Invalid order id"),
        404: _doc("No order with this id"),
    },
    tags=["orders"],
)
def get_order(order_id: Annotated[str, _ORDER_ID]) -> Response[dict[str, Any]]:
    view = describe_order(runtime().orders, order_id)
    if view is None:
        return _error(404, "OrderNotFound", f"no order {order_id}")
    return _order(200, view)


@app.post(
    "/orders/<orderId>/cancel",
    summary="Cancel an order",
    description=(
        "Only CREATED or RESERVED orders can be cancelled; the reserved stock is released "
        "asynchronously (OrderCancelled). Cancelling an already cancelled order returns it unchanged."
    ),
    responses={
        200: _doc("The cancelled order", OrderView),
        400: _doc("Invalid order id, or a body that is not JSON (none is needed)"),
        404: _doc("No order with this id"),
        409: _doc("The order can no longer be cancelled (PAID or REJECTED); the message says why"),
        413: _doc("Body larger than 64 KiB (none is needed)"),
        415: _doc("Body that is not application/json (none is needed)"),
        503: _doc("A dependency is unavailable, or the order kept changing; retry"),
    },
    tags=["orders"],
)
def cancel(order_id: Annotated[str, _ORDER_ID]) -> Response[dict[str, Any]]:
    cancelled = cancel_order(runtime().orders, order_id)
    logger.info("order cancelled", extra={"order_id": order_id, "already": cancelled.already})
    return _order(200, order_view(cancelled.order))


@app.exception_handler(RequestValidationError)  # type: ignore[untyped-decorator]
def _invalid_request(exc: RequestValidationError) -> Response[Any]:
    # ("body", "items", 0, "quantity") -> "items.0.quantity"; ("header", ...) stays qualified.
    pairs = api.field_errors(exc.errors())
    fields = [FieldError(field=field, message=message) for field, message in pairs]
    return _error(400, "ValidationError", "the request is invalid; nothing was stored", fields)


@app.exception_handler(IdempotencyKeyMismatch)  # type: ignore[untyped-decorator]
def _key_mismatch(exc: IdempotencyKeyMismatch) -> Response[Any]:
    return _error(422, "IdempotencyKeyMismatch", str(exc))


@app.exception_handler(OrderNotFound)  # type: ignore[untyped-decorator]
def _not_found(exc: OrderNotFound) -> Response[Any]:
    return _error(404, "OrderNotFound", str(exc))


@app.exception_handler(NotCancellable)  # type: ignore[untyped-decorator]
def _not_cancellable(exc: NotCancellable) -> Response[Any]:
    return _error(409, "OrderNotCancellable", str(exc))


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
    return api.resolve(app, event, context, max_body_bytes=MAX_BODY_BYTES)


def openapi_document() -> str:
    """The OpenAPI document as checked in (stable key order, trailing newline).

    Powertools documents its default ``422 HTTPValidationError`` on every validated route; this API
    answers validation errors with 400 (and uses 422 for an Idempotency-Key reused with another
    body), so those default entries and their schemas are removed.
    """
    return api.openapi_document(app, title="Relay orders API")


if __name__ == "__main__":
    print(openapi_document(), end="")
