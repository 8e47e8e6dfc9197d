"""Client of the invoice API (an external HTTPS service, configured by base URL).

``POST {base}/invoices`` with ``Idempotency-Key: {operationId}:invoice`` issues at most one invoice per
key; a repeat with the same body returns the same invoice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relay.errors import DependencyUnavailable, PayloadConflict, classify_http_status
from relay.http import post_json

WHAT = "invoice API"


def invoice_key(operation_id: str) -> str:
    return f"{operation_id}:invoice"


class InvoiceApiClient:
    def __init__(self, base_url: str, *, timeout_seconds: float) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_seconds = timeout_seconds

    def issue(self, invoice_input: Mapping[str, Any], *, idempotency_key: str) -> dict[str, Any]:
        """Issue (or get back) the invoice; returns ``{"invoiceId": ...}``."""
        response = post_json(
            f"{self.base_url}/invoices",
            invoice_input,
            headers={"Idempotency-Key": idempotency_key},
            timeout=self.timeout_seconds,
            what=WHAT,
        )
        body = response.body if isinstance(response.body, dict) else {}
        if response.status == 422 and body.get("error") == "IdempotencyKeyReused":
            raise PayloadConflict(
                f"{WHAT} refused Idempotency-Key {idempotency_key}: it was used with a different invoice "
                "input. Nothing was issued by this call; investigate before redriving."
            )
        error = classify_http_status(
            response.status, response.text, retry_after=response.retry_after, what=WHAT
        )
        if error is not None:
            raise error
        if not body.get("invoiceId"):
            raise DependencyUnavailable(
                f"{WHAT} answered HTTP {response.status} without an invoiceId; retrying."
            )
        return {"invoiceId": str(body["invoiceId"]), "status": str(body.get("status", "ISSUED"))}
