"""Fake of the invoice API: issues at most one invoice per ``Idempotency-Key``.

The caller sends ``Idempotency-Key: {operationId}:invoice``. The fake counts the invoices it
actually issued per key (and per operation) so a scenario can assert "invoiced exactly once". It can
also refuse chosen inputs (``refuse_payers``, ``refuse_amount_over``): a business outcome, not a
fault. A refusal is recorded per key and is final for it: a repeat with the same key and body gets
the same refusal even after the knob is lifted, and nothing is ever issued or counted for that key.

HTTP API (business calls pass through the fault knobs of ``FaultKnobs`` first):
    POST /invoices    {operationId, paymentRef, amount, currency, payer, payee, lines?}
        201 {"invoiceId", "idempotencyKey", "status": "ISSUED"}    first request for the key
        200 the same invoice                                         same key, same body
        422 {"error": "InvoiceRefused", "reason", "idempotencyKey", "message"}
                                                                     refuse_payers / refuse_amount_over;
                                                                     a repeat of the key: the same 422
        422 {"error": "IdempotencyKeyReused", ...}                   same key, different body
        400 missing Idempotency-Key or invalid body
    GET  /invoices/{invoiceId}       the invoice; 404 unknown
    GET  /_admin/invoices            {key: count};  /_admin/invoices-by-operation -> {operationId: count}
    GET  /_admin/refusals            {key: reason}
    GET  /_admin/calls | /_admin/knobs, POST /_admin/knobs | /_admin/reset
"""

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, ClassVar

from local.fakes._server import (
    FakeService,
    FaultKnobs,
    JsonObject,
    OncePerKey,
    Request,
    Response,
    error_response,
    json_response,
)

REQUIRED_FIELDS = ("operationId", "paymentRef", "amount", "currency", "payer", "payee")


@dataclass(frozen=True)
class InvoiceKnobs(FaultKnobs):
    """The common fault knobs, plus business refusals of chosen inputs."""

    refuse_payers: frozenset[str] = frozenset()
    """Payers the invoice API refuses to invoice (422 InvoiceRefused: recorded, never issued)."""
    refuse_amount_over: Decimal | None = None
    """Invoices with an amount above this are refused."""


@dataclass
class _Invoice:
    invoice_id: str
    key: str
    fingerprint: str
    body: JsonObject

    def to_json(self) -> JsonObject:
        return {
            "invoiceId": self.invoice_id,
            "idempotencyKey": self.key,
            "status": "ISSUED",
            "operationId": self.body["operationId"],
            "paymentRef": self.body["paymentRef"],
            "amount": self.body["amount"],
            "currency": self.body["currency"],
        }


def validate_invoice(body: Any) -> dict[str, str]:
    """Field errors of an invoice request; empty when it is valid."""
    if not isinstance(body, dict):
        return {"body": "must be a JSON object"}
    errors = {
        name: "required, a non-empty string"
        for name in REQUIRED_FIELDS
        if not isinstance(body.get(name), str) or not body[name].strip()
    }
    if "amount" not in errors:
        try:
            Decimal(body["amount"])
        except InvalidOperation:
            errors["amount"] = "must be a decimal string, e.g. '12.50'"
    if "lines" in body and not isinstance(body["lines"], list):
        errors["lines"] = "must be a list when given"
    return errors


class InvoiceApiFake(FakeService[InvoiceKnobs]):
    """``with InvoiceApiFake(InvoiceKnobs(outage=True)) as fake: ...``"""

    name: ClassVar[str] = "invoice-api"
    knobs_type: ClassVar[type[FaultKnobs]] = InvoiceKnobs

    def __init__(
        self, knobs: InvoiceKnobs | None = None, *, host: str = "127.0.0.1", port: int = 0, quiet: bool = True
    ) -> None:
        super().__init__(knobs, host=host, port=port, quiet=quiet)
        self._keyed: OncePerKey[_Invoice] = OncePerKey(
            what="invoice",
            route="/invoices",
            refused_error="InvoiceRefused",
            not_done="issued",
            id_of=lambda invoice: invoice.invoice_id,
        )
        self._by_id: dict[str, _Invoice] = {}
        self._invoices: dict[str, int] = {}
        self._invoices_by_operation: dict[str, int] = {}
        self._next_id = 1

    def invoices(self) -> dict[str, int]:
        """Invoices actually issued, per idempotency key."""
        with self.lock:
            return dict(self._invoices)

    def invoices_by_operation(self) -> dict[str, int]:
        """Invoices per operationId: catches a caller that sends a new key when it retries."""
        with self.lock:
            return dict(self._invoices_by_operation)

    def refusals(self) -> dict[str, str]:
        """Invoices refused (``refuse_payers`` / ``refuse_amount_over``), per idempotency key: the reason."""
        with self.lock:
            return self._keyed.reasons()

    def admin_views(self) -> dict[str, JsonObject]:
        return {
            "invoices": dict(self._invoices),
            "invoices-by-operation": dict(self._invoices_by_operation),
            "refusals": self._keyed.reasons(),
        }

    def reset_state(self) -> None:
        self._keyed.clear()
        self._by_id.clear()
        self._invoices.clear()
        self._invoices_by_operation.clear()

    def handle(self, request: Request) -> Response:
        segments = request.segments
        if request.method == "POST" and segments == ["invoices"]:
            return self._create(request)
        if request.method == "GET" and len(segments) == 2 and segments[0] == "invoices":
            with self.lock:
                invoice = self._by_id.get(segments[1])
                if invoice is None:
                    return error_response(404, "InvoiceNotFound", f"no invoice {segments[1]}")
                return json_response(200, invoice.to_json())
        return error_response(404, "NotFound", f"no route {request.method} {request.path}")

    def _create(self, request: Request) -> Response:
        parsed = self._keyed.parse(request, validate_invoice)
        if isinstance(parsed, Response):
            return parsed
        key, body = parsed

        def make(digest: str) -> _Invoice:
            invoice = _Invoice(f"INV-{self._next_id:06d}", key, digest, body)
            self._next_id += 1
            self._by_id[invoice.invoice_id] = invoice
            self._invoices[key] = self._invoices.get(key, 0) + 1
            operation = body["operationId"]
            self._invoices_by_operation[operation] = self._invoices_by_operation.get(operation, 0) + 1
            return invoice

        with self.lock:
            return self._keyed.create(
                key, body, refusal_reason=lambda: self._refusal_reason(self._knobs, body), make=make
            )

    @staticmethod
    def _refusal_reason(knobs: InvoiceKnobs, body: JsonObject) -> str | None:
        if body["payer"] in knobs.refuse_payers:
            return f"payer {body['payer']} may not be invoiced"
        limit = knobs.refuse_amount_over
        amount = Decimal(body["amount"])
        if limit is not None and amount.is_finite() and amount > limit:
            return f"amount {body['amount']} exceeds the limit {limit}"
        return None
