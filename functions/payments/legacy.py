"""Client of the legacy payment system (an external HTTPS service, configured by base URL).

``POST {base}/payments`` with ``Idempotency-Key: {operationId}:payment`` is create-or-get: the first
call charges, every later call with the same key and body returns the payment's current state
without charging again. That is why the worker calls POST again for a status check instead of a
separate GET: if the first call never reached the system, the "check" submits it.

``GET {base}/payments/{idempotencyKey}`` only reads (404: no payment under the key). Reconciliation
uses it when the outcome of a POST is unknown: asking must never charge.

Not wrapped in Powertools idempotency on purpose: it would store and replay a "PROCESSING" answer,
while the whole point of a status check is to get a fresh one. The system's own key is the guard.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from relay.errors import DependencyUnavailable
from relay.http import KeyedApi

WHAT = "legacy payment system"


class LegacyStatus(enum.StrEnum):
    COMPLETED = "COMPLETED"
    PROCESSING = "PROCESSING"
    REJECTED = "REJECTED"


@dataclass(frozen=True)
class LegacyOutcome:
    status: LegacyStatus
    payment_ref: str | None
    reason: str | None
    document: dict[str, Any]


def payment_key(operation_id: str) -> str:
    return f"{operation_id}:payment"


class LegacyPaymentsClient(KeyedApi):
    def __init__(self, base_url: str, *, timeout_seconds: float) -> None:
        super().__init__(base_url, timeout_seconds=timeout_seconds, what=WHAT)

    def submit(self, payment: Mapping[str, Any], *, idempotency_key: str) -> LegacyOutcome:
        """Submit (or re-submit, as a status check) one payment. Raises DependencyUnavailable for
        timeouts, connection errors, 429 and 5xx; PayloadConflict if the key was used for another body."""
        response = self.post("/payments", payment, idempotency_key=idempotency_key)
        rejected = response.body if isinstance(response.body, dict) else {}
        if response.status == 422 and rejected.get("status") == LegacyStatus.REJECTED:
            return LegacyOutcome(
                LegacyStatus.REJECTED, None, str(rejected.get("reason") or "rejected"), rejected
            )
        body = self.answer(
            response,
            idempotency_key=idempotency_key,
            not_done="Nothing was charged by this call; the request sent for an operation must never change.",
        )
        status = str(body.get("status", ""))
        if status == LegacyStatus.COMPLETED and body.get("paymentRef"):
            return LegacyOutcome(LegacyStatus.COMPLETED, str(body["paymentRef"]), None, body)
        if status == LegacyStatus.PROCESSING or response.status == 202:
            ref = body.get("paymentRef")
            return LegacyOutcome(LegacyStatus.PROCESSING, str(ref) if ref else None, None, body)
        # An answer we do not understand is treated like a 5xx: retried, then redriven to the DLQ.
        raise DependencyUnavailable(
            f"{WHAT} answered HTTP {response.status} with status {status!r}; retrying."
        )

    def lookup(self, idempotency_key: str) -> LegacyOutcome | None:
        """The payment's state under ``idempotency_key``, or None when the system has none (nothing
        was charged). Raises DependencyUnavailable when the system cannot say."""
        response = self.get(f"/payments/{quote(idempotency_key, safe='')}")
        if response.status == 404:
            return None
        body = self.answer(response, idempotency_key=idempotency_key, not_done="Nothing was charged.")
        status = str(body.get("status", ""))
        ref = str(body["paymentRef"]) if body.get("paymentRef") else None
        if status == LegacyStatus.COMPLETED and ref:
            return LegacyOutcome(LegacyStatus.COMPLETED, ref, None, body)
        if status == LegacyStatus.REJECTED:
            return LegacyOutcome(LegacyStatus.REJECTED, None, str(body.get("reason") or "rejected"), body)
        if status == LegacyStatus.PROCESSING:
            return LegacyOutcome(LegacyStatus.PROCESSING, ref, None, body)
        raise DependencyUnavailable(
            f"{WHAT} answered HTTP {response.status} with status {status!r} to a lookup"
        )
