"""The HTTP API's request and response models (pydantic; camelCase on the wire).

These models ARE the API contract: the resolver validates requests against them and the checked-in
``openapi.json`` is generated from them.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, ConfigDict, Field, StrictInt
from pydantic.alias_generators import to_camel

from orders.settings import MAX_ORDER_ITEMS
from relay import api_models
from relay.api_models import ApiModel

_IDENTIFIER = r"^[A-Za-z0-9][A-Za-z0-9._:@/-]*$"
_SKU = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


def _json_integer(value: Any) -> Any:
    """JSON Schema's ``integer`` is any number with a zero fractional part: 2.0 is the integer 2."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# Strict otherwise: "2" and true are not quantities.
JsonInteger = Annotated[StrictInt, BeforeValidator(_json_integer)]


class OrderItem(ApiModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    sku: str = Field(min_length=1, max_length=64, pattern=_SKU, examples=["SKU-RED-MUG"])
    quantity: JsonInteger = Field(ge=1, le=10_000, examples=[2])


class OrderRequest(ApiModel):
    """``POST /orders`` body."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    customer_id: str = Field(min_length=1, max_length=128, pattern=_IDENTIFIER, examples=["cust-7"])
    items: list[OrderItem] = Field(
        min_length=1,
        max_length=MAX_ORDER_ITEMS,
        description="The order lines, as sent; lines of the same SKU are reserved together",
    )
    currency: str = Field(
        description="ISO 4217 code, upper case", min_length=3, max_length=3, pattern=r"^[A-Z]{3}$"
    )

    def to_document(self) -> dict[str, Any]:
        """The request as hashed for Idempotency-Key comparison."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class HistoryView(ApiModel):
    status: str = Field(examples=["CREATED"])
    at: str = Field(examples=["2024-05-01T10:00:00.000Z"])


class CancellationView(ApiModel):
    code: str = Field(description="Why the system cancelled the order: PaymentFailed or PaymentCancelled")
    reason: str
    operation_id: str = Field(description="The payment operation that failed")


class RejectionView(ApiModel):
    code: str = Field(examples=["InsufficientStock"])
    reason: str
    sku: str


class ShipmentView(ApiModel):
    status: str = Field(description="REQUESTED, or REFUSED by the shipping API (with the reason)")
    shipment_id: str | None = Field(None, description="The shipping API's id of the shipment")
    reason: str | None = None
    at: str


class OrderView(ApiModel):
    order_id: str
    status: str = Field(examples=["RESERVED"])
    customer_id: str
    currency: str
    items: list[OrderItem]
    history: list[HistoryView]
    rejection: RejectionView | None = None
    cancellation: CancellationView | None = Field(
        None, description="Present when the order was cancelled because its payment failed"
    )
    payment_operation_id: str | None = None
    shipment: ShipmentView | None = Field(
        None, description="Present once the paid order's shipment was requested from the shipping API"
    )
    created_at: str
    updated_at: str


class FieldError(api_models.FieldError):
    field: str = Field(examples=["items.0.quantity"])


class ErrorResponse(api_models.ErrorResponse):
    error: str = Field(examples=["ValidationError"])
    fields: list[FieldError] | None = None  # type: ignore[assignment]  # this API's FieldError
