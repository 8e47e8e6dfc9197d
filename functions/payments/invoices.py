"""Client of the invoice API (an external HTTPS service, configured by base URL).

``POST {base}/invoices`` with ``Idempotency-Key: {operationId}:invoice`` issues at most one invoice per
key; a repeat with the same body returns the same invoice. ``422 {"error": "InvoiceRefused", "reason"}``
is the API's final refusal of an invoice (nothing issued): ``InvoiceRefused``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relay.errors import BusinessRejection, DependencyUnavailable
from relay.http import KeyedApi

WHAT = "invoice API"


class InvoiceRefused(BusinessRejection):
    """The invoice API refused this invoice for good (a business answer, not a fault)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"{WHAT} refused the invoice: {reason}")
        self.reason = reason


def invoice_key(operation_id: str) -> str:
    return f"{operation_id}:invoice"


class InvoiceApiClient(KeyedApi):
    def __init__(self, base_url: str, *, timeout_seconds: float) -> None:
        super().__init__(base_url, timeout_seconds=timeout_seconds, what=WHAT)

    def issue(self, invoice_input: Mapping[str, Any], *, idempotency_key: str) -> dict[str, Any]:
        """Issue (or get back) the invoice; returns ``{"invoiceId": ...}``."""
        response = self.post("/invoices", invoice_input, idempotency_key=idempotency_key)
        refusal = response.body if isinstance(response.body, dict) else {}
        if response.status == 422 and refusal.get("error") == "InvoiceRefused":
            raise InvoiceRefused(str(refusal.get("reason") or "no reason given"))
        body = self.answer(
            response, idempotency_key=idempotency_key, not_done="Nothing was issued by this call."
        )
        if not body.get("invoiceId"):
            raise DependencyUnavailable(
                f"{WHAT} answered HTTP {response.status} without an invoiceId; retrying."
            )
        return {"invoiceId": str(body["invoiceId"]), "status": str(body.get("status", "ISSUED"))}
