"""HTTP API handler: ``POST /payments`` (202 + operationId), ``GET /operations/{operationId}`` and
``POST /operations/{operationId}/cancel``.

Thin: Powertools resolver with request validation (pydantic models in ``payments.models``), the
domain in ``payments.intake``. The OpenAPI document generated from this resolver is checked in as
``functions/payments/openapi.json``; regenerate it with ``make openapi``.
"""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Path

from payments.cancellation import NotCancellable, OperationNotFound, cancel_operation
from payments.intake import IdempotencyKeyMismatch, accept_payment, describe_operation, view_of
from payments.models import (
    CancelRequest,
    ErrorResponse,
    FieldError,
    OperationAccepted,
    OperationView,
    PaymentRequest,
)
from payments.settings import API
from payments.wiring import wiring
from relay import api
from relay.callback_urls import CallbackUrlRefused, check_callback_url
from relay.observability import logger as relay_logger

logger = relay_logger()
_wiring = wiring.checked(API)
http = api.HttpApi(
    "Relay payments API",
    model=ErrorResponse,
    field_model=FieldError,
    max_body_bytes=lambda: _wiring().settings.max_body_bytes,
)
app, errors, handler, openapi_document = http.app, http.errors, http.handler, http.openapi_document
_OPERATION_ID = Path(alias="operationId", min_length=1, max_length=64)


@app.post(
    "/payments",
    summary="Request a payment (asynchronous)",
    description=(
        "Stores the request and answers 202 at once; poll the operation at the Location header. "
        "An Idempotency-Key makes retries safe: the same key and body return the same operation."
    ),
    responses={
        202: errors.doc("Accepted; processing continues asynchronously", OperationAccepted),
        **errors.body_docs(too_large="Body larger than the configured maximum"),
        **errors.keyed_docs(),
    },
    tags=["payments"],
)
def create_payment(
    request: Annotated[PaymentRequest, Body(embed=False)],
    idempotency_key: Annotated[str | None, api.idempotency_key_header()] = None,
) -> Response[dict[str, Any]]:
    wired = _wiring()
    if request.callback_url is not None:
        try:
            # The request's own shape only (no DNS): the sender checks what the host resolves to.
            check_callback_url(
                request.callback_url,
                allow_loopback_http=wired.settings.callback_allow_loopback_http,
                resolve_host=False,
            )
        except CallbackUrlRefused as refused:
            return errors.invalid_field("callbackUrl", str(refused))
    accepted = accept_payment(
        request,
        idempotency_key=idempotency_key,
        # The operation's own id when the client sent none: one id less in the item.
        correlation_id=app.current_event.headers.get("x-correlation-id"),
        store=wired.store,
        s3_client=wired.s3,
        bucket=wired.bucket,
        caller=api.caller(app),
        claim_check_threshold_bytes=wired.settings.claim_check_threshold_bytes,
        request_key_items=wired.settings.request_key_items,
        deadline_seconds=wired.settings.silence_seconds,
        now=wired.clock(),
    )
    logger.info(
        "payment request accepted",
        extra={"operation_id": accepted.operation_id, "replayed": accepted.replayed},
    )
    location = {"Location": f"/operations/{accepted.operation_id}"}
    return api.json_response(
        202, OperationAccepted(operation_id=accepted.operation_id, status=accepted.status), location
    )


@app.get(
    "/operations/<operationId>",
    summary="Status of an operation",
    responses=errors.read_docs("operation", OperationView),
    tags=["operations"],
)
def get_operation(operation_id: Annotated[str, _OPERATION_ID]) -> Response[dict[str, Any]]:
    view = describe_operation(_wiring().store, operation_id)
    return errors.found(view, "OperationNotFound", f"no operation {operation_id}")


@app.post(
    "/operations/<operationId>/cancel",
    summary="Cancel an operation",
    description=(
        "Only a PENDING operation (its payment not yet submitted to the legacy system) can be "
        "cancelled: it becomes CANCELLED (terminal; nothing is charged) and OperationCancelled releases "
        "an order's reservation. Once submitted: 409 with the state and why. A repeated cancel answers "
        "the cancelled operation again, unchanged. The body is optional."
    ),
    responses={
        200: errors.doc("The cancelled operation", OperationView),
        **errors.body_docs(too_large="Body larger than the configured maximum"),
        404: errors.doc("No operation with this id"),
        409: errors.doc("The operation can no longer be cancelled; the message says its state and why"),
    },
    tags=["operations"],
)
def cancel(
    operation_id: Annotated[str, _OPERATION_ID],
    request: Annotated[CancelRequest | None, Body(embed=False)] = None,
) -> Response[dict[str, Any]]:
    wired = _wiring()
    cancelled = cancel_operation(
        wired.store,
        wired.settings,
        operation_id,
        reason=request.reason if request else None,
        now=wired.clock(),
    )
    logger.info("operation cancelled", extra={"operation_id": operation_id, "already": cancelled.already})
    return api.json_response(200, view_of(cancelled.operation))


errors.answer(IdempotencyKeyMismatch, 422, "IdempotencyKeyMismatch")
errors.answer(OperationNotFound, 404, "OperationNotFound")
errors.answer(NotCancellable, 409, "OperationNotCancellable")


http.main(__name__)
