"""Shipping: OrderPaid (from the app bus's shipping rule) -> one shipment per paid, reserved order, asked
for with ``Idempotency-Key: {orderId}:shipment`` and recorded on the order once."""

from __future__ import annotations

from typing import Any

import pytest

from local.fakes.shipping_api import ShippingApiFake
from relay.envelope import Envelope, new_envelope
from relay.unwrap import envelope_from_sqs_record
from tests.handlers.orders.api_client import body_of, get_order, order_request, placed_order
from tests.handlers.orders.world import (
    INVENTORY,
    PAID_ORDERS,
    SHIPPING,
    OrdersWorld,
    deliver,
    failed_ids,
    payment_completed,
    redeliver,
)

LINES = [{"sku": "SKU-MUG", "quantity": 2}, {"sku": "SKU-TEAPOT", "quantity": 1}]


def reserve(world: OrdersWorld, order_id: str) -> None:
    response = deliver(world, INVENTORY, *world.outbox(order_id, "OrderCreated"))
    assert failed_ids(response) == []


def pay(world: OrdersWorld, order_id: str, operation_id: str = "op-1") -> Envelope:
    """PaymentCompleted -> PAID; returns the OrderPaid the order service published."""
    response = deliver(world, PAID_ORDERS, payment_completed(order_id, operation_id))
    assert failed_ids(response) == []
    (paid,) = world.outbox(order_id, "OrderPaid")
    return paid


def paid_and_reserved(world: OrdersWorld, body: dict[str, Any] | None = None) -> tuple[str, Envelope]:
    order_id = placed_order(body)
    reserve(world, order_id)
    return order_id, pay(world, order_id)


def shipment_of(order_id: str) -> dict[str, Any] | None:
    response = get_order(order_id)
    assert response["statusCode"] == 200, response
    shipment: dict[str, Any] | None = body_of(response).get("shipment")
    return shipment


def post_calls(fake: ShippingApiFake) -> list[dict[str, Any]]:
    return [c for c in fake.calls() if c["method"] == "POST" and c["path"] == "/shipments"]


def test_a_paid_reserved_order_is_shipped_once_under_duplicate_delivery(
    world: OrdersWorld, shipping: ShippingApiFake
) -> None:
    order_id, paid = paid_and_reserved(world)
    key = f"{order_id}:shipment"

    response = deliver(world, SHIPPING, paid, times=3)
    again = deliver(world, SHIPPING, paid)  # re-published: a new bus event, the same envelope

    assert failed_ids(response) == failed_ids(again) == []
    assert shipping.shipments() == {key: 1}
    assert shipping.shipments_by_order() == {order_id: 1}
    assert [c["key"] for c in post_calls(shipping)] == [key]
    made = shipping.shipment_for(order_id)
    assert made is not None and made["items"] == LINES
    shipment = shipment_of(order_id)
    assert shipment is not None
    assert shipment["status"] == "REQUESTED"
    assert shipment["shipmentId"] == made["shipmentId"]
    assert shipment["at"].endswith("Z")
    assert "reason" not in shipment
    stored = world.order(order_id)
    assert stored is not None and stored["shipment"]["eventId"] == paid.event_id
    assert stored["status"] == "PAID"
    assert world.parked(SHIPPING) == []
    assert world.receive_all(world.queues[SHIPPING].url) == []


def test_the_shipment_request_carries_the_order_and_its_lines(
    world: OrdersWorld, shipping: ShippingApiFake
) -> None:
    order_id, paid = paid_and_reserved(world)

    deliver(world, SHIPPING, paid)

    made = shipping.shipment_for(order_id)
    assert made is not None
    assert made["orderId"] == order_id
    assert made["idempotencyKey"] == f"{order_id}:shipment"
    assert made["items"] == LINES


def test_a_paid_order_rejected_for_stock_is_acknowledged_and_not_shipped(
    world: OrdersWorld, shipping: ShippingApiFake
) -> None:
    # Paid before inventory saw it, then rejected: SKU-LAST has 1 in stock, 5 are ordered.
    order_id = placed_order(order_request(items=[{"sku": "SKU-LAST", "quantity": 5}]))
    paid = pay(world, order_id)
    reserve(world, order_id)
    assert world.status(order_id) == "REJECTED"

    response = deliver(world, SHIPPING, paid, times=2)

    assert failed_ids(response) == []
    assert shipping.calls() == []
    assert shipping.shipments() == {}
    assert shipment_of(order_id) is None
    assert world.parked(SHIPPING) == []
    assert world.receive_all(world.queues[SHIPPING].url) == []  # no retry either


def test_an_order_paid_before_its_stock_is_reserved_waits_and_then_ships(
    world: OrdersWorld, shipping: ShippingApiFake
) -> None:
    order_id = placed_order()
    paid = pay(world, order_id)  # PAID, no reservation yet

    first = deliver(world, SHIPPING, paid)

    assert failed_ids(first) == []  # handled: a delayed copy carries the retry
    copy = world.retry_copy(SHIPPING, attempt=1)
    (record,) = world.lambda_event(SHIPPING, [copy])["Records"]
    assert envelope_from_sqs_record(record).event_id == paid.event_id
    assert shipping.calls() == []
    assert shipment_of(order_id) is None
    assert world.parked(SHIPPING) == []

    reserve(world, order_id)
    reservation = world.reservation(order_id)
    assert reservation is not None and reservation["status"] == "RESERVED"
    second = redeliver(world, SHIPPING, [copy])

    assert failed_ids(second) == []
    assert shipping.shipments_by_order() == {order_id: 1}
    shipment = shipment_of(order_id)
    assert shipment is not None and shipment["status"] == "REQUESTED"
    assert world.parked(SHIPPING) == []


def test_a_refused_shipment_is_recorded_with_its_reason_and_acknowledged(
    world: OrdersWorld, shipping: ShippingApiFake
) -> None:
    shipping.set_knobs(refuse_customers=frozenset({"cust-7"}))
    order_id, paid = paid_and_reserved(world)
    key = f"{order_id}:shipment"

    response = deliver(world, SHIPPING, paid, times=2)

    assert failed_ids(response) == []
    assert shipping.shipments() == {}
    assert shipping.shipments_by_order() == {}
    assert shipping.refusals() == {key: "customer cust-7 may not be shipped to"}
    assert len(post_calls(shipping)) == 1  # recorded: the repeat asks nothing
    shipment = shipment_of(order_id)
    assert shipment is not None
    assert shipment["status"] == "REFUSED"
    assert shipment["reason"] == "customer cust-7 may not be shipped to"
    assert "shipmentId" not in shipment
    assert world.status(order_id) == "PAID"
    assert world.parked(SHIPPING) == []
    assert world.receive_all(world.queues[SHIPPING].url) == []


def test_an_outage_is_retried_records_nothing_and_the_recovery_ships_once(
    world: OrdersWorld, shipping: ShippingApiFake
) -> None:
    order_id, paid = paid_and_reserved(world)
    shipping.set_knobs(outage=True)

    first = deliver(world, SHIPPING, paid)

    assert failed_ids(first) == []
    copy = world.retry_copy(SHIPPING, attempt=1)
    assert shipping.shipments() == {}
    assert shipment_of(order_id) is None
    assert world.parked(SHIPPING) == []

    shipping.set_knobs(outage=False)
    second = redeliver(world, SHIPPING, [copy])

    assert failed_ids(second) == []
    assert shipping.shipments() == {f"{order_id}:shipment": 1}
    shipment = shipment_of(order_id)
    assert shipment is not None and shipment["status"] == "REQUESTED"
    assert world.parked(SHIPPING) == []


def test_a_5xx_is_retried_like_an_outage(world: OrdersWorld, shipping: ShippingApiFake) -> None:
    order_id, paid = paid_and_reserved(world)
    shipping.set_knobs(fail_rate_5xx=1.0)

    deliver(world, SHIPPING, paid)

    copy = world.retry_copy(SHIPPING, attempt=1)
    assert shipment_of(order_id) is None
    shipping.set_knobs(fail_rate_5xx=0.0)
    assert failed_ids(redeliver(world, SHIPPING, [copy])) == []
    assert shipping.shipments_by_order() == {order_id: 1}


@pytest.mark.parametrize("mode", ["500", "drop"])
def test_a_reply_lost_after_the_shipment_was_made_is_retried_without_a_second_shipment(
    world: OrdersWorld, shipping: ShippingApiFake, mode: str
) -> None:
    order_id, paid = paid_and_reserved(world)
    shipping.set_knobs(fail_after_commit_rate=1.0, fail_after_commit_mode=mode)

    first = deliver(world, SHIPPING, paid)

    assert failed_ids(first) == []
    copy = world.retry_copy(SHIPPING, attempt=1)
    assert shipping.shipments_by_order() == {order_id: 1}  # made; only the answer was lost
    assert shipment_of(order_id) is None

    shipping.set_knobs(fail_after_commit_rate=0.0)
    second = redeliver(world, SHIPPING, [copy])

    assert failed_ids(second) == []
    assert shipping.shipments_by_order() == {order_id: 1}
    assert shipping.shipments() == {f"{order_id}:shipment": 1}
    assert [c["key"] for c in post_calls(shipping)] == [f"{order_id}:shipment"] * 2
    made = shipping.shipment_for(order_id)
    shipment = shipment_of(order_id)
    assert made is not None and shipment is not None
    assert shipment["shipmentId"] == made["shipmentId"]
    assert world.parked(SHIPPING) == []


def test_order_paid_for_an_unknown_order_is_parked(world: OrdersWorld, shipping: ShippingApiFake) -> None:
    ghost = new_envelope(
        "OrderPaid",
        identity=["ord-ghost", "paid"],
        ids={"orderId": "ord-ghost", "operationId": "op-1"},
        payload={"customerId": "cust-7", "operationId": "op-1", "items": LINES},
        correlation_id="corr-ghost",
    )

    response = deliver(world, SHIPPING, ghost)

    assert failed_ids(response) == []
    assert world.parked_reasons(SHIPPING) == ["UnknownOrder"]
    assert shipping.calls() == []
