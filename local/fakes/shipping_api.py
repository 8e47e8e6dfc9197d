"""Fake of the shipping API: requests at most one shipment per ``Idempotency-Key``.

The caller (the orders consumer reacting to OrderPaid) sends ``Idempotency-Key: {orderId}:shipment``.
The fake counts the shipments it actually created per key (and per order) so a scenario can assert
"shipped exactly once". It can also refuse chosen customers (``refuse_customers``): a business
outcome, not a fault. A refusal is recorded per key and is final for it: a repeat with the same key
and body gets the same refusal even after the knob is lifted, and nothing is ever created or counted
for that key.

HTTP API (business calls pass through the fault knobs of ``FaultKnobs`` first):
    POST /shipments   {orderId, customerId, items: [{sku, quantity >= 1}, ...] (non-empty)}
        201 {"shipmentId", "idempotencyKey", "orderId", "status": "REQUESTED", "items"}
                                                                     first request for the key
        200 the same shipment                                        same key, same body
        422 {"error": "ShipmentRefused", "reason", "idempotencyKey", "message"}
                                                                     refuse_customers;
                                                                     a repeat of the key: the same 422
        422 {"error": "IdempotencyKeyReused", ...}                   same key, different body
        400 {"error": "IdempotencyKeyMissing" | "InvalidJson" | "ValidationError", ...}
                                                                     ValidationError has "fields"
    GET  /shipments/{shipmentId}     the shipment; 404 unknown
    GET  /_admin/shipments           {key: count};  /_admin/shipments-by-order -> {orderId: count}
    GET  /_admin/refusals            {key: reason}
    GET  /_admin/calls | /_admin/knobs, POST /_admin/knobs | /_admin/reset
"""

from dataclasses import dataclass
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

REQUIRED_FIELDS = ("orderId", "customerId")


@dataclass(frozen=True)
class ShippingKnobs(FaultKnobs):
    """The common fault knobs, plus business refusals of chosen customers."""

    refuse_customers: frozenset[str] = frozenset()
    """Customers the shipping API refuses to ship to (422 ShipmentRefused: recorded, never created)."""


@dataclass
class _Shipment:
    shipment_id: str
    key: str
    fingerprint: str
    body: JsonObject

    @property
    def order_id(self) -> str:
        return str(self.body["orderId"])

    def to_json(self) -> JsonObject:
        return {
            "shipmentId": self.shipment_id,
            "idempotencyKey": self.key,
            "orderId": self.order_id,
            "status": "REQUESTED",
            "items": [{"sku": item["sku"], "quantity": item["quantity"]} for item in self.body["items"]],
        }


def validate_shipment(body: Any) -> dict[str, str]:
    """Field errors of a shipment request, by field name (``items[1].quantity``); empty when valid."""
    if not isinstance(body, dict):
        return {"body": "must be a JSON object"}
    errors = {
        name: "required, a non-empty string"
        for name in REQUIRED_FIELDS
        if not isinstance(body.get(name), str) or not body[name].strip()
    }
    items = body.get("items")
    if not isinstance(items, list) or not items:
        errors["items"] = "required, a non-empty list of {sku, quantity}"
        return errors
    for index, item in enumerate(items):
        where = f"items[{index}]"
        if not isinstance(item, dict):
            errors[where] = "must be an object {sku, quantity}"
            continue
        sku = item.get("sku")
        if not isinstance(sku, str) or not sku.strip():
            errors[f"{where}.sku"] = "required, a non-empty string"
        quantity = item.get("quantity")
        if not isinstance(quantity, int) or isinstance(quantity, bool) or quantity < 1:
            errors[f"{where}.quantity"] = "required, an integer >= 1"
    return errors


class ShippingApiFake(FakeService[ShippingKnobs]):
    """``with ShippingApiFake(ShippingKnobs(outage=True)) as fake: ...``"""

    name: ClassVar[str] = "shipping-api"
    knobs_type: ClassVar[type[FaultKnobs]] = ShippingKnobs

    def __init__(
        self,
        knobs: ShippingKnobs | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        quiet: bool = True,
    ) -> None:
        super().__init__(knobs, host=host, port=port, quiet=quiet)
        self._keyed: OncePerKey[_Shipment] = OncePerKey(
            what="shipment",
            route="/shipments",
            refused_error="ShipmentRefused",
            not_done="created",
            id_of=lambda shipment: shipment.shipment_id,
        )
        self._by_id: dict[str, _Shipment] = {}
        self._shipments: dict[str, int] = {}
        self._shipments_by_order: dict[str, int] = {}
        # Not reset: a shipment id seen before a reset answers 404 afterwards, never another shipment.
        self._next_id = 1

    def shipments(self) -> dict[str, int]:
        """Shipments actually created, per idempotency key."""
        with self.lock:
            return dict(self._shipments)

    def shipments_by_order(self) -> dict[str, int]:
        """Shipments per orderId: catches a caller that sends a new key when it retries."""
        with self.lock:
            return dict(self._shipments_by_order)

    def refusals(self) -> dict[str, str]:
        """Shipments refused (``refuse_customers``), per idempotency key: the reason."""
        with self.lock:
            return self._keyed.reasons()

    def shipment_for(self, order_id: str) -> JsonObject | None:
        """The shipment created for ``order_id`` (the first one, if a caller made several), or ``None``."""
        with self.lock:
            for shipment in self._keyed.by_key.values():
                if shipment.order_id == order_id:
                    return shipment.to_json()
            return None

    def admin_views(self) -> dict[str, JsonObject]:
        return {
            "shipments": dict(self._shipments),
            "shipments-by-order": dict(self._shipments_by_order),
            "refusals": self._keyed.reasons(),
        }

    def reset_state(self) -> None:
        self._keyed.clear()
        self._by_id.clear()
        self._shipments.clear()
        self._shipments_by_order.clear()

    def handle(self, request: Request) -> Response:
        segments = request.segments
        if request.method == "POST" and segments == ["shipments"]:
            return self._create(request)
        if request.method == "GET" and len(segments) == 2 and segments[0] == "shipments":
            with self.lock:
                shipment = self._by_id.get(segments[1])
                if shipment is None:
                    return error_response(404, "ShipmentNotFound", f"no shipment {segments[1]}")
                return json_response(200, shipment.to_json())
        return error_response(404, "NotFound", f"no route {request.method} {request.path}")

    def _create(self, request: Request) -> Response:
        parsed = self._keyed.parse(request, validate_shipment)
        if isinstance(parsed, Response):
            return parsed
        key, body = parsed

        def make(digest: str) -> _Shipment:
            shipment = _Shipment(f"SHP-{self._next_id:06d}", key, digest, body)
            self._next_id += 1
            self._by_id[shipment.shipment_id] = shipment
            self._shipments[key] = self._shipments.get(key, 0) + 1
            order = shipment.order_id
            self._shipments_by_order[order] = self._shipments_by_order.get(order, 0) + 1
            return shipment

        with self.lock:
            return self._keyed.create(
                key, body, refusal_reason=lambda: self._refusal_reason(self._knobs, body), make=make
            )

    @staticmethod
    def _refusal_reason(knobs: ShippingKnobs, body: JsonObject) -> str | None:
        if body["customerId"] in knobs.refuse_customers:
            return f"customer {body['customerId']} may not be shipped to"
        return None
