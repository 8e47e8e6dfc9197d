"""Loyalty HTTP API: ``GET /customers/{customerId}/points`` -- the balance and the ledger.

Thin: Powertools resolver with request validation (``loyalty.models``), the data in
``loyalty.store``. The OpenAPI document generated from this resolver is checked in as
``functions/loyalty/openapi.json``; regenerate it with ``make openapi``.
"""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Path, Query

from loyalty.models import LedgerEntry, PointsAccount
from loyalty.settings import API
from loyalty.wiring import wiring
from relay import api

_wiring = wiring.checked(API)
# The orders API's customer id pattern: the points belong to the customer an order names.
_CUSTOMER_ID = r"^[A-Za-z0-9][A-Za-z0-9._:@/-]*$"
http = api.HttpApi(
    "Relay loyalty API",
    max_body_bytes=1024,
    not_done="nothing was read",
    unqualified=("query", "path"),
    strip_value_error=True,
)
app, errors, handler, openapi_document = http.app, http.errors, http.handler, http.openapi_document


@app.get(
    "/customers/<customerId>/points",
    summary="A customer's loyalty points: the balance and the ledger",
    description=(
        "Each paid order accrues points once (the rule is the stage's points per unit ordered); a paid "
        "order later rejected is reversed once. A customer with no points yet has a balance of 0."
    ),
    responses=errors.read_docs(
        "balance and the ledger",
        PointsAccount,
        invalid="Invalid customer id or limit",
        unmatched="A customer id",
    ),
    tags=["loyalty"],
)
def get_points(
    customer_id: Annotated[str, Path(alias="customerId", min_length=1, max_length=128, pattern=_CUSTOMER_ID)],
    limit: Annotated[int, Query(ge=1, le=1000, description="At most this many orders in the ledger")] = 500,
) -> Response[dict[str, Any]]:
    balance, orders, more = _wiring().api_points.account(customer_id, limit=limit)
    ledger: list[LedgerEntry] = []
    for entry in orders:
        if entry.accrued_at is not None and entry.accrual_event_id is not None:
            ledger.append(
                LedgerEntry(
                    order_id=entry.order_id,
                    kind="ACCRUAL",
                    points=entry.accrued or 0,
                    at=entry.accrued_at,
                    event_id=entry.accrual_event_id,
                )
            )
        if entry.reversed_at is not None and entry.reversal_event_id is not None:
            ledger.append(
                LedgerEntry(
                    order_id=entry.order_id,
                    kind="REVERSAL",
                    points=-(entry.reversed or 0),
                    at=entry.reversed_at,
                    event_id=entry.reversal_event_id,
                )
            )
    ledger.sort(key=lambda line: (line.at, line.kind))
    return api.json_response(
        200, PointsAccount(customer_id=customer_id, balance=balance, ledger=ledger, truncated=more)
    )


http.main(__name__)
