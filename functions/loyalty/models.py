"""The loyalty HTTP API's response models (pydantic; camelCase on the wire). They ARE the contract: the
checked-in ``openapi.json`` is generated from them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from relay.api_models import ApiModel, ErrorResponse, FieldError

__all__ = ["ErrorResponse", "FieldError", "LedgerEntry", "PointsAccount"]


class LedgerEntry(ApiModel):
    order_id: str
    kind: Literal["ACCRUAL", "REVERSAL"]
    points: int = Field(description="Signed: an accrual adds, a reversal subtracts", examples=[30, -30])
    at: str = Field(examples=["2026-12-01T10:00:00.000Z"])
    event_id: str = Field(description="The order event that made the entry (OrderPaid or OrderRejected)")


class PointsAccount(ApiModel):
    customer_id: str
    balance: int = Field(description="The sum of the ledger's points", examples=[30])
    ledger: list[LedgerEntry] = Field(description="Oldest first")
    truncated: bool = Field(
        False, description="More orders moved the balance than `limit`: the ledger shows the first ones"
    )
