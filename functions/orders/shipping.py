"""Shipping: OrderPaid (routed by the app's event bus) -> one shipment from the external shipping API.

The order service never calls shipping inline: an EventBridge rule on the bus hears OrderPaid and its
queue feeds this consumer, which follows the kernel's rules:

* ``Idempotency-Key: {orderId}:shipment`` -- a redelivery, a crash after the call and a concurrent
  duplicate all ask the API again with the SAME key, and the API answers with the shipment it made;
* the shipment is recorded on the order once, with the event as processed (ONE conditional write,
  ``relay.entity_events``); a delivery that finds it recorded is acknowledged without effect;
* only a PAID order whose stock is reserved ships. An order paid before its reservation waits (a
  transient error: the message comes back after its backoff) until inventory reserves the stock or
  rejects the order; a REJECTED or CANCELLED order is never shipped (acknowledged, counted);
* the API refusing the shipment (422 ShipmentRefused) is a business outcome: recorded on the order
  with the reason, counted (``ShipmentRefused``, alarmed) and acknowledged, not retried forever.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from orders.intake import items_payload
from orders.orders import AlreadyApplied, Order, Shipment, Status, StockHold, UnknownOrder, now_iso
from orders.store import OrderStore
from orders.subscriptions import ORDER_PAID
from relay import steps
from relay.envelope import Envelope
from relay.errors import DependencyUnavailable
from relay.http import KeyedApi
from relay.observability import logger, record_metric
from relay.steps import StepRule

WHAT = "shipping API"
REQUESTED = "REQUESTED"
REFUSED = "REFUSED"


def shipment_key(order_id: str) -> str:
    return f"{order_id}:shipment"


@dataclass(frozen=True)
class ShipmentAnswer:
    shipment_id: str | None
    refused: str | None = None  # the API's reason when it refused the shipment


class ShippingApiClient(KeyedApi):
    """``POST /shipments`` with ``Idempotency-Key: {orderId}:shipment``."""

    def __init__(self, base_url: str, *, timeout_seconds: float) -> None:
        super().__init__(base_url, timeout_seconds=timeout_seconds, what=WHAT)

    def request_shipment(self, order: Order) -> ShipmentAnswer:
        key = shipment_key(order.order_id)
        body = {"orderId": order.order_id, "customerId": order.customer_id, "items": items_payload(order)}
        response = self.post("/shipments", body, idempotency_key=key)
        answer = response.body if isinstance(response.body, dict) else {}
        if response.status == 422 and answer.get("error") == "ShipmentRefused":
            return ShipmentAnswer(
                None, refused=str(answer.get("reason") or answer.get("message") or "refused")
            )
        document = self.answer(response, idempotency_key=key, not_done="No shipment was recorded.")
        shipment_id = document.get("shipmentId")
        if not isinstance(shipment_id, str) or not shipment_id:
            raise DependencyUnavailable(f"{WHAT} answered {response.status} without a shipmentId; retrying")
        return ShipmentAnswer(shipment_id)


SHIP = StepRule("shipping", (ORDER_PAID,), "orderId", routed_by="bus rule's event pattern")


def ship_paid_order(
    envelope: Envelope,
    orders: OrderStore,
    shipping: ShippingApiClient,
    *,
    now: datetime,
) -> None:
    """OrderPaid -> the order's shipment, requested and recorded exactly once."""
    order = steps.begin(SHIP, envelope, orders.get_order, unknown=UnknownOrder)
    if order is None:
        return
    order_id = order.order_id
    if order.shipment is not None:
        steps.acknowledge(envelope, f"shipment already recorded ({order.shipment.status})", order_id=order_id)
        return
    if order.status is not Status.PAID:
        # Paid, then rejected for want of stock (the payment is refunded): nothing to ship.
        why = f"order is {order.status}; nothing to ship"
        steps.acknowledge(envelope, why, metric="ShipmentSkipped", order_id=order_id)
        return
    if order.stock is not StockHold.RESERVED:
        # Paid before inventory took the stock: it will reserve it or reject the order. Come back.
        raise DependencyUnavailable(
            f"order {order_id} is paid but its stock is not reserved yet; shipping waits for inventory"
        )

    answer = shipping.request_shipment(order)
    at = now_iso(now)
    shipment = (
        Shipment(REFUSED, at, envelope.event_id, reason=answer.refused)
        if answer.refused is not None
        else Shipment(REQUESTED, at, envelope.event_id, shipment_id=answer.shipment_id)
    )

    def explain(old: dict[str, Any] | None) -> Exception:
        if old and old.get("shipment"):
            return AlreadyApplied(f"order {order_id} already has its shipment")
        status = (old or {}).get("status")
        return DependencyUnavailable(
            f"order {order_id} is {status or 'gone'}, not PAID, since it was read; retrying"
        )

    write = orders.shipment_write(order_id, shipment, envelope, on_condition_failed=explain)
    if not steps.commit(lambda: orders.apply_one(write), envelope, order_id=order_id):
        return
    if answer.refused is not None:
        record_metric("ShipmentRefused", event_type=envelope.event_type)
        logger().warning("shipment refused", extra={"order_id": order_id, "reason": answer.refused})
        return
    record_metric("ShipmentRequested", event_type=envelope.event_type)
    logger().info("shipment requested", extra={"order_id": order_id, "shipment_id": answer.shipment_id})
