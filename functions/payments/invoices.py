"""Client of the invoice API (an external HTTPS service, configured by base URL).

``POST {base}/invoices`` with ``Idempotency-Key: {operationId}:invoice`` issues at most one invoice per
key; a repeat with the same body returns the same invoice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relay.errors import DependencyUnavailable
from relay.http import KeyedApi

WHAT = "invoice API"


def invoice_key(operation_id: str) -> str:
    return f"{operation_id}:invoice"


class InvoiceApiClient(KeyedApi):
    def __init__(self, base_url: str, *, timeout_seconds: float) -> None:
        super().__init__(base_url, timeout_seconds=timeout_seconds, what=WHAT)

    def issue(self, invoice_input: Mapping[str, Any], *, idempotency_key: str) -> dict[str, Any]:
        """Issue (or get back) the invoice; returns ``{"invoiceId": ...}``."""
        response = self.post("/invoices", invoice_input, idempotency_key=idempotency_key)
        body = self.answer(
            response, idempotency_key=idempotency_key, not_done="Nothing was issued by this call."
        )
        if not body.get("invoiceId"):
            raise DependencyUnavailable(
                f"{WHAT} answered HTTP {response.status} without an invoiceId; retrying."
            )
        return {"invoiceId": str(body["invoiceId"]), "status": str(body.get("status", "ISSUED"))}
