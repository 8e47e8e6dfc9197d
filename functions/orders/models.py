"""The HTTP API's request and response models (pydantic; camelCase on the wire).

These models ARE the API contract: the resolver validates requests against them and the checked-in
``openapi.json`` is generated from them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator
from pydantic.alias_generators import to_camel

from orders.settings import MAX_SKUS_PER_TRANSACTION

_IDENTIFIER = r"^[A-Za-z0-9][A-Za-z0-9._:@/-]*$"
_SKU = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


class ApiModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class OrderItem(ApiModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    sku: str = Field(min_length=1, max_length=64, pattern=_SKU, examples=["SKU-RED-MUG"])
    # Strict: "2" or 2.0 or true are not quantities.
    quantity: StrictInt = Field(ge=1, le=10_000, examples=[2])


class OrderRequest(ApiModel):
    """``POST /orders`` body. The number of items is further limited by ``MAX_ORDER_ITEMS``."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    customer_id: str = Field(min_length=1, max_length=128, pattern=_IDENTIFIER, examples=["cust-7"])
    items: list[OrderItem] = Field(
        min_length=1,
        max_length=MAX_SKUS_PER_TRANSACTION,
        description="One line per SKU (a SKU may appear only once)",
    )
    currency: str = Field(
        description="ISO 4217 code, upper case", min_length=3, max_length=3, pattern=r"^[A-Z]{3}$"
    )

    @field_validator("items")
    @classmethod
    def _one_line_per_sku(cls, items: list[OrderItem]) -> list[OrderItem]:
        seen: set[str] = set()
        for item in items:
            if item.sku in seen:
                raise ValueError(f"SKU {item.sku!r} appears more than once; send one line per SKU")
            seen.add(item.sku)
        return items

    def to_document(self) -> dict[str, Any]:
        """The request as hashed for Idempotency-Key comparison."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class HistoryView(ApiModel):
    status: str = Field(examples=["CREATED"])
    at: str = Field(examples=["2024-05-01T10:00:00.000Z"])


class RejectionView(ApiModel):
    code: str = Field(examples=["InsufficientStock"])
    reason: str
    sku: str


class OrderView(ApiModel):
    order_id: str
    status: str = Field(examples=["RESERVED"])
    customer_id: str
    currency: str
    items: list[OrderItem]
    history: list[HistoryView]
    rejection: RejectionView | None = None
    payment_operation_id: str | None = None
    created_at: str
    updated_at: str


class FieldError(ApiModel):
    field: str = Field(examples=["items.0.quantity"])
    message: str


class ErrorResponse(ApiModel):
    error: str = Field(examples=["ValidationError"])
    message: str
    fields: list[FieldError] | None = None
