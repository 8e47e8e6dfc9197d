"""Fake of the legacy payment system: charges at most once per ``Idempotency-Key``.

The real system can take up to 15 minutes; the caller sends ``Idempotency-Key: {operationId}:payment``
and either gets the outcome at once or ``202 PROCESSING`` and checks again later. The fake models
both, plus business rejections of chosen inputs, and counts the charges it actually made per key
(and per operation) so a reliability scenario can assert "charged exactly once".

HTTP API (business calls pass through the fault knobs of ``FaultKnobs`` first):
    POST /payments                 {operationId, paymentId, amount, currency, payer, payee}
        200 {"status": "COMPLETED", "paymentRef", "idempotencyKey", ...}
        202 {"status": "PROCESSING", "paymentRef", ...}    when accept_then_complete_after > 0
        422 {"status": "REJECTED", "reason", ...}          reject_payers / reject_amount_over
        422 {"error": "IdempotencyKeyReused", ...}         same key, different body
        400 missing Idempotency-Key or invalid body
    GET  /payments/{idempotencyKey}    200 with the current state (PROCESSING / COMPLETED / REJECTED), 404
        Each GET, and each repeated POST with the same key and body, is one status check.
    GET  /_admin/charges               {key: count};  /_admin/charges-by-operation -> {operationId: count}
    GET  /_admin/calls | /_admin/knobs, POST /_admin/knobs | /_admin/reset
"""

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, ClassVar

from local.fakes._server import (
    FakeService,
    FaultKnobs,
    JsonObject,
    KnobError,
    Request,
    Response,
    error_response,
    fingerprint,
    json_response,
)

REQUIRED_FIELDS = ("operationId", "paymentId", "amount", "currency", "payer", "payee")


@dataclass(frozen=True)
class LegacyPaymentKnobs(FaultKnobs):
    accept_then_complete_after: int = 0
    """0: answer COMPLETED at once. N > 0: answer 202 PROCESSING; the N-th status check completes it."""
    reject_payers: frozenset[str] = frozenset()
    """Payers whose payments are rejected (a business outcome: recorded, never charged)."""
    reject_amount_over: Decimal | None = None
    """Payments with an amount above this are rejected."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.accept_then_complete_after < 0:
            raise KnobError("knob accept_then_complete_after must be 0 (complete at once) or more")


@dataclass
class _Payment:
    key: str
    fingerprint: str
    body: JsonObject
    status: str
    payment_ref: str | None
    checks_left: int = 0
    reason: str | None = None

    def to_json(self) -> JsonObject:
        state: JsonObject = {
            "status": self.status,
            "idempotencyKey": self.key,
            "operationId": self.body["operationId"],
            "paymentId": self.body["paymentId"],
            "amount": self.body["amount"],
            "currency": self.body["currency"],
        }
        if self.payment_ref is not None:
            state["paymentRef"] = self.payment_ref
        if self.reason is not None:
            state["reason"] = self.reason
        return state

    def response(self) -> Response:
        if self.status == "REJECTED":
            return json_response(422, self.to_json())
        if self.status == "PROCESSING":
            return json_response(202, self.to_json(), Location=f"/payments/{self.key}")
        return json_response(200, self.to_json())


def validate_payment(body: Any) -> dict[str, str]:
    """Field errors of a payment request; empty when it is valid."""
    if not isinstance(body, dict):
        return {"body": "must be a JSON object"}
    errors = {
        name: "required, a non-empty string"
        for name in REQUIRED_FIELDS
        if not isinstance(body.get(name), str) or not body[name].strip()
    }
    if "amount" not in errors:
        try:
            amount = Decimal(body["amount"])
        except InvalidOperation:
            errors["amount"] = "must be a decimal string, e.g. '12.50'"
        else:
            if not amount.is_finite() or amount <= 0:
                errors["amount"] = "must be greater than 0"
    return errors


class LegacyPaymentsFake(FakeService[LegacyPaymentKnobs]):
    """``with LegacyPaymentsFake(LegacyPaymentKnobs(fail_rate_5xx=0.2, seed=7)) as fake: ...``"""

    name: ClassVar[str] = "legacy-payments"
    knobs_type: ClassVar[type[FaultKnobs]] = LegacyPaymentKnobs

    def __init__(
        self,
        knobs: LegacyPaymentKnobs | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        quiet: bool = True,
    ) -> None:
        super().__init__(knobs, host=host, port=port, quiet=quiet)
        self._payments: dict[str, _Payment] = {}
        self._charges: dict[str, int] = {}
        self._charges_by_operation: dict[str, int] = {}
        self._next_ref = 1

    # inspection --------------------------------------------------------------------------------

    def charges(self) -> dict[str, int]:
        """Charges actually made, per idempotency key."""
        with self.lock:
            return dict(self._charges)

    def charges_by_operation(self) -> dict[str, int]:
        """Charges per operationId: catches a caller that sends a new key when it retries."""
        with self.lock:
            return dict(self._charges_by_operation)

    def payment(self, key: str) -> JsonObject | None:
        """The payment's current state without counting a status check."""
        with self.lock:
            payment = self._payments.get(key)
            return None if payment is None else payment.to_json()

    def admin_views(self) -> dict[str, JsonObject]:
        return {"charges": dict(self._charges), "charges-by-operation": dict(self._charges_by_operation)}

    def reset_state(self) -> None:
        self._payments.clear()
        self._charges.clear()
        self._charges_by_operation.clear()

    def call_key(self, request: Request) -> str | None:
        segments = request.segments
        if request.method == "GET" and len(segments) == 2 and segments[0] == "payments":
            return segments[1]
        return request.idempotency_key

    # business routes ---------------------------------------------------------------------------

    def handle(self, request: Request) -> Response:
        segments = request.segments
        if request.method == "POST" and segments == ["payments"]:
            return self._create(request)
        if request.method == "GET" and len(segments) == 2 and segments[0] == "payments":
            return self._check(segments[1])
        return error_response(404, "NotFound", f"no route {request.method} {request.path}")

    def _create(self, request: Request) -> Response:
        key = request.idempotency_key
        if key is None:
            return error_response(
                400, "IdempotencyKeyMissing", "POST /payments requires an Idempotency-Key header"
            )
        try:
            body = request.json()
        except ValueError:
            return error_response(400, "InvalidJson", "the body is not JSON")
        errors = validate_payment(body)
        if errors:
            return error_response(400, "ValidationError", "the payment request is invalid", fields=errors)
        digest = fingerprint(body)
        with self.lock:
            existing = self._payments.get(key)
            if existing is not None:
                if existing.fingerprint != digest:
                    return error_response(
                        422,
                        "IdempotencyKeyReused",
                        f"Idempotency-Key {key} was already used with a different request body; "
                        "nothing was charged. Use a new key for a new payment.",
                        idempotencyKey=key,
                    )
                self._count_check(existing)
                return existing.response()
            payment = self._accept(key, digest, body)
            return payment.response()

    def _accept(self, key: str, digest: str, body: JsonObject) -> _Payment:
        knobs = self._knobs
        reason = self._rejection_reason(knobs, body)
        if reason is not None:
            payment = _Payment(key, digest, body, "REJECTED", None, reason=reason)
        else:
            ref = f"PAY-{self._next_ref:06d}"
            self._next_ref += 1
            self._charges[key] = self._charges.get(key, 0) + 1
            operation = body["operationId"]
            self._charges_by_operation[operation] = self._charges_by_operation.get(operation, 0) + 1
            wait = knobs.accept_then_complete_after
            payment = _Payment(
                key, digest, body, "PROCESSING" if wait else "COMPLETED", ref, checks_left=wait
            )
        self._payments[key] = payment
        return payment

    @staticmethod
    def _rejection_reason(knobs: LegacyPaymentKnobs, body: JsonObject) -> str | None:
        if body["payer"] in knobs.reject_payers:
            return f"payer {body['payer']} is not allowed to pay"
        limit = knobs.reject_amount_over
        if limit is not None and Decimal(body["amount"]) > limit:
            return f"amount {body['amount']} exceeds the limit {limit}"
        return None

    def _check(self, key: str) -> Response:
        with self.lock:
            payment = self._payments.get(key)
            if payment is None:
                return error_response(404, "PaymentNotFound", f"no payment with Idempotency-Key {key}")
            self._count_check(payment)
            state = payment.to_json()
        return json_response(200, state)

    @staticmethod
    def _count_check(payment: _Payment) -> None:
        if payment.status == "PROCESSING":
            payment.checks_left -= 1
            if payment.checks_left <= 0:
                payment.status = "COMPLETED"
