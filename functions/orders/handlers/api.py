"""HTTP API handler: ``POST /orders`` (201), ``GET /orders/{orderId}``, ``POST /orders/{orderId}/cancel``.

Thin: Powertools resolver with request validation (pydantic models in ``orders.models``), the domain
in ``orders.intake``. The OpenAPI document generated from this resolver is checked in as
``functions/orders/openapi.json``; regenerate it with ``make openapi``.
"""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Path

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
from orders.settings import API
from orders.wiring import wiring
from relay import api
from relay.observability import logger as relay_logger

logger = relay_logger()
_wiring = wiring.checked(API)
# An order is a few hundred bytes; anything this large is not one (checked before parsing).
http = api.HttpApi("Relay orders API", model=ErrorResponse, field_model=FieldError, max_body_bytes=64 * 1024)
app, errors, handler, openapi_document = http.app, http.errors, http.handler, http.openapi_document
_ORDER_ID = Path(alias="orderId", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9-]+$")


@app.post(
    "/orders",
    summary="Place an order",
    description=(
        "Stores the order (status CREATED) and its OrderCreated event in one write; inventory, "
        "notifications and analytics follow asynchronously. An Idempotency-Key makes retries safe: "
        "the same key and body return the same order (200 on a replay)."
    ),
    responses={
        201: errors.doc("Created; the order is at the Location header", OrderView),
        200: errors.doc("Replay of an earlier request with the same Idempotency-Key and body", OrderView),
        **errors.body_docs(too_large="Body larger than 64 KiB"),
        **errors.keyed_docs(),
    },
    tags=["orders"],
)
def create_order(
    request: Annotated[OrderRequest, Body(embed=False)],
    idempotency_key: Annotated[str | None, api.idempotency_key_header()] = None,
) -> Response[dict[str, Any]]:
    wired = _wiring()
    placed = place_order(
        request,
        idempotency_key=idempotency_key,
        correlation_id=api.correlation_id(app),
        store=wired.orders,
        caller=api.caller(app),
        request_key_items=wired.settings.request_key_items,
        now=wired.clock(),
    )
    logger.info("order placed", extra={"order_id": placed.order.order_id, "replayed": placed.replayed})
    location = {"Location": f"/orders/{placed.order.order_id}"}
    return api.json_response(200 if placed.replayed else 201, order_view(placed.order), location)


@app.get(
    "/orders/<orderId>",
    summary="An order and its status history",
    responses=errors.read_docs("order", OrderView),
    tags=["orders"],
)
def get_order(order_id: Annotated[str, _ORDER_ID]) -> Response[dict[str, Any]]:
    return errors.found(describe_order(_wiring().orders, order_id), "OrderNotFound", f"no order {order_id}")


@app.post(
    "/orders/<orderId>/cancel",
    summary="Cancel an order",
    description=(
        "Only CREATED or RESERVED orders can be cancelled; the reserved stock is released "
        "asynchronously (OrderCancelled). Cancelling an already cancelled order returns it unchanged."
    ),
    responses={
        200: errors.doc("The cancelled order", OrderView),
        400: errors.doc("Invalid order id, or a body that is not JSON (none is needed)"),
        404: errors.doc("No order with this id"),
        409: errors.doc("The order can no longer be cancelled (PAID or REJECTED); the message says why"),
        413: errors.doc("Body larger than 64 KiB (none is needed)"),
        415: errors.doc("Body that is not application/json (none is needed)"),
        503: errors.doc("A dependency is unavailable, or the order kept changing; retry"),
    },
    tags=["orders"],
)
def cancel(order_id: Annotated[str, _ORDER_ID]) -> Response[dict[str, Any]]:
    wired = _wiring()
    cancelled = cancel_order(wired.orders, order_id, now=wired.clock())
    logger.info("order cancelled", extra={"order_id": order_id, "already": cancelled.already})
    return api.json_response(200, order_view(cancelled.order))


errors.answer(IdempotencyKeyMismatch, 422, "IdempotencyKeyMismatch")
errors.answer(OrderNotFound, 404, "OrderNotFound")
errors.answer(NotCancellable, 409, "OrderNotCancellable")


http.main(__name__)
