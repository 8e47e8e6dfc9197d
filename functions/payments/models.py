"""The HTTP API's request and response models (pydantic; camelCase on the wire).

These models ARE the API contract: the resolver validates requests against them and the checked-in
``openapi.json`` is generated from them.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from pydantic import ConfigDict, Field, JsonValue, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel

from payments.operations import MEANING, TERMINAL, Status
from relay import api_models
from relay.api_models import ApiModel

# ISO 4217 codes this service accepts, with their minor units (digits after the decimal point).
# A compact list of the common currencies; extending it is a one-line change.
CURRENCY_MINOR_UNITS: dict[str, int] = {
    "AED": 2, "ARS": 2, "AUD": 2, "BHD": 3, "BRL": 2, "CAD": 2, "CHF": 2, "CLP": 0, "CNY": 2,
    "COP": 2, "CZK": 2, "DKK": 2, "EGP": 2, "EUR": 2, "GBP": 2, "HKD": 2, "HUF": 2, "IDR": 2,
    "ILS": 2, "INR": 2, "ISK": 0, "JOD": 3, "JPY": 0, "KRW": 0, "KWD": 3, "MXN": 2, "MYR": 2,
    "NGN": 2, "NOK": 2, "NZD": 2, "OMR": 3, "PHP": 2, "PLN": 2, "QAR": 2, "RON": 2, "SAR": 2,
    "SEK": 2, "SGD": 2, "THB": 2, "TND": 3, "TRY": 2, "TWD": 2, "UAH": 2, "USD": 2, "VND": 0,
    "XAF": 0, "XOF": 0, "ZAR": 2,
}  # fmt: skip

_IDENTIFIER = r"^[A-Za-z0-9][A-Za-z0-9._:@/-]*$"
# A callback URL as the document states it (pydantic enforces the same pattern, so a URL valid under the
# document is never refused for its shape): https to a DNS host name -- lower case, dotted, the last label
# starting with a letter, so never an IP literal or "localhost" -- an optional port, path and query; or
# http://127.0.0.1 for the sandbox's local receivers (refused on AWS). What DNS says of the host is
# checked when a notice is sent (relay.callback_urls).
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_PORT = r"(?::(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?"
_CALLBACK_URL = (
    rf"^(?:https://(?:{_LABEL}\.)+[a-z](?:[a-z0-9-]{{0,61}}[a-z0-9])?{_PORT}|http://127\.0\.0\.1{_PORT})"
    r"(?:/[A-Za-z0-9._~%!$&'()*+,;=:@/-]*)?(?:\?[A-Za-z0-9._~%!$&'()*+,;=:@/?-]*)?$"
)


def amount_pattern(minor_units: int) -> str:
    """The amounts a currency with ``minor_units`` digits after the point accepts, as a regex the
    OpenAPI document carries: greater than 0, at most that many decimals, no sign, exponent, leading
    zero or trailing point ("12.50", "0.05", "1000"; not "012", "1.", "1e3", "0.00")."""
    if minor_units == 0:
        return r"^[1-9][0-9]*$"
    # 0.x must have a non-zero digit among its (at most minor_units) decimals.
    fractions = "|".join(
        "0" * zeros + "[1-9]" + (f"[0-9]{{0,{minor_units - 1 - zeros}}}" if zeros < minor_units - 1 else "")
        for zeros in range(minor_units)
    )
    return rf"^(?:[1-9][0-9]*(?:\.[0-9]{{1,{minor_units}}})?|0\.(?:{fractions}))$"


_MAX_MINOR_UNITS = max(CURRENCY_MINOR_UNITS.values())
_CURRENCY_CODES: list[JsonValue] = [*sorted(CURRENCY_MINOR_UNITS)]
_DECIMAL = re.compile(r"(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")


def _amount_rules() -> dict[str, Any]:
    """JSON Schema for the amount's minor units per currency: the field's own pattern allows the
    most decimals any currency has; each currency with fewer narrows it."""
    rules = []
    for units in sorted(set(CURRENCY_MINOR_UNITS.values()) - {_MAX_MINOR_UNITS}):
        codes = sorted(code for code, n in CURRENCY_MINOR_UNITS.items() if n == units)
        rules.append(
            {
                "if": {"properties": {"currency": {"enum": codes}}, "required": ["currency"]},
                "then": {"properties": {"amount": {"pattern": amount_pattern(units)}}},
            }
        )
    return {"allOf": rules}


class PaymentRequest(ApiModel):
    """``POST /payments`` body. ``details`` is free JSON and may be large (it travels by claim check)."""

    # The amount's per-currency rule is in the OpenAPI document too (allOf of if/then), so a request
    # valid under the document is never rejected; the validators below enforce the same rules.
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", json_schema_extra=_amount_rules()
    )

    payment_id: str = Field(min_length=1, max_length=128, pattern=_IDENTIFIER, examples=["pay-2024-0001"])
    order_id: str | None = Field(None, min_length=1, max_length=128, pattern=_IDENTIFIER, examples=["ord-42"])
    # Declared before ``amount`` so the amount validator can see it (pydantic validates in order).
    currency: str = Field(
        description="ISO 4217 code, upper case",
        min_length=3,
        max_length=3,
        examples=["EUR"],
        json_schema_extra={"enum": _CURRENCY_CODES},
    )
    amount: str = Field(
        description="Decimal string > 0 with at most the currency's minor units (JPY 0, EUR 2, KWD 3)",
        min_length=1,
        max_length=32,
        examples=["12.50"],
        json_schema_extra={"pattern": amount_pattern(_MAX_MINOR_UNITS)},
    )
    payer: str = Field(min_length=1, max_length=256, examples=["acct-payer-1"])
    payee: str = Field(min_length=1, max_length=256, examples=["acct-payee-9"])
    callback_url: str | None = Field(
        None,
        min_length=8,
        max_length=2048,
        pattern=_CALLBACK_URL,
        description=(
            "Where to POST the operation's completion notice once it ends (signed: see the README). "
            "https to a host name (no IP literal, no credentials, no fragment); a host that resolves to "
            "a private, loopback or link-local address is never sent to, and redirects are never "
            "followed. http://127.0.0.1 is for the sandbox only (refused on AWS)"
        ),
        examples=["https://hooks.example.com/relay/payments"],
    )
    # JSON Schema cannot bound nesting; relay.api refuses a body deeper than MAX_BODY_DEPTH (32) with a 400.
    details: dict[str, Any] = Field(
        default_factory=dict,
        description="Free JSON, stored with the request; the whole body may nest at most 32 levels deep",
    )

    @field_validator("currency")
    @classmethod
    def _known_currency(cls, value: str) -> str:
        if value not in CURRENCY_MINOR_UNITS:
            raise ValueError(
                f"{value!r} is not an ISO 4217 currency code this service accepts (e.g. EUR, USD)"
            )
        return value

    @field_validator("amount")
    @classmethod
    def _valid_amount(cls, value: str, info: ValidationInfo) -> str:
        if not _DECIMAL.fullmatch(value):
            raise ValueError(
                "must be a decimal string like '12.50' (digits and one optional '.', no leading zeros)"
            )
        if Decimal(value) <= 0:
            raise ValueError("must be greater than 0")
        currency = info.data.get("currency")
        if currency is not None:
            decimals = len(value.split(".", 1)[1]) if "." in value else 0
            allowed = CURRENCY_MINOR_UNITS[currency]
            if decimals > allowed:
                raise ValueError(f"{currency} has {allowed} minor unit digit(s); got {decimals}")
        return value

    def to_document(self) -> dict[str, Any]:
        """The request as stored in S3 (and hashed for Idempotency-Key comparison)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class CancelRequest(ApiModel):
    """``POST /operations/{operationId}/cancel`` body (optional)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    reason: str | None = Field(
        None,
        min_length=1,
        max_length=500,
        description="Why, kept on the operation",
        examples=["order changed"],
    )


class OperationAccepted(ApiModel):
    operation_id: str
    status: str = Field(examples=["PENDING"])


class StepView(ApiModel):
    step: str = Field(examples=["payment"])
    status: str = Field(examples=["COMPLETED"])
    at: str = Field(examples=["2024-05-01T10:00:00.000Z"])


class ErrorInfo(ApiModel):
    code: str = Field(examples=["PaymentRejected"])
    message: str


class ResultRefs(ApiModel):
    request: str | None = Field(
        None,
        description="S3 URI of the stored request (only a request above the claim-check threshold is in S3)",
    )
    result: str | None = Field(
        None, description="S3 URI of the legacy system's result (only when above the claim-check threshold)"
    )
    invoice_input: str | None = Field(
        None, description="S3 URI of the invoice input (operations accepted before the one-write layout)"
    )
    payment_ref: str | None = None
    invoice_id: str | None = None


class OperationView(ApiModel):
    operation_id: str
    status: Status = Field(
        examples=["COMPLETED"],
        description="The operation's state. "
        + "; ".join(f"{status}: {meaning}" for status, meaning in MEANING.items())
        + f". Terminal: {', '.join(sorted(TERMINAL))}.",
    )
    payment_id: str
    order_id: str | None = None
    steps: list[StepView]
    error: ErrorInfo | None = None
    created_at: str
    updated_at: str
    next_attempt_at: str | None = Field(
        None, description="While the current step waits to try again (a partner is unavailable): when"
    )
    attempts: int | None = Field(None, description="How often the current step has been retried")
    results: ResultRefs | None = None
    callback_url: str | None = Field(None, description="Where the completion notice goes, if asked for")


class FieldError(api_models.FieldError):
    field: str = Field(examples=["amount"])


class ErrorResponse(api_models.ErrorResponse):
    error: str = Field(examples=["ValidationError"])
    fields: list[FieldError] | None = None  # type: ignore[assignment]  # this API's FieldError
