"""Done when: through the handlers against moto's SNS -> SQS fan-out, 30 orders -- every stream batch
published twice, every SQS batch delivered twice, client retries with the same Idempotency-Key --
some paid through PaymentCompleted events (published twice), one cancelled (and then paid: an
orphan), one rejected for stock: stock moves once per order, the customer hears each event once,
analytics holds every event (read back once per eventId), each paid order is shipped once
(OrderPaid through the bus's shipping rule, every batch twice), nothing is parked."""

from __future__ import annotations

from local.fakes.shipping_api import ShippingApiFake
from local.fakes.webhook import WebhookFake
from tests.handlers.orders.api_client import body_of, cancel, order_request, post_order
from tests.handlers.orders.world import PAYMENT_TOPIC, OrdersWorld, Pump, payment_completed

ORDERS = 30
PAID = range(1, 21)  # orders 1..20 are paid
CANCELLED = 0
REJECTED = ORDERS - 1


def lines(index: int) -> list[dict[str, object]]:
    if index == REJECTED:
        return [{"sku": "SKU-A", "quantity": 1}, {"sku": "SKU-LAST", "quantity": 2}]  # only 1 SKU-LAST
    return [{"sku": "SKU-A", "quantity": 1 + index % 3}, {"sku": "SKU-B", "quantity": 2}]


def test_thirty_orders_with_every_message_twice_move_stock_once_and_notify_once(
    world: OrdersWorld, webhook: WebhookFake, shipping: ShippingApiFake
) -> None:
    world.seed({"SKU-A": 1000, "SKU-B": 1000})
    order_ids = []
    for index in range(ORDERS):
        body = order_request(customerId=f"cust-{index}", items=lines(index))
        first = post_order(body, idempotency_key=f"client-{index}")
        retry = post_order(body, idempotency_key=f"client-{index}")  # the client retried
        assert (first["statusCode"], retry["statusCode"]) == (201, 200)
        assert body_of(first)["orderId"] == body_of(retry)["orderId"]
        order_ids.append(body_of(first)["orderId"])

    pump = Pump(world, deliveries=2, publish_deliveries=2)
    pump.run()
    assert world.status(order_ids[CANCELLED]) == "RESERVED"
    assert cancel(order_ids[CANCELLED])["statusCode"] == 200
    for index in [*PAID, CANCELLED]:  # the cancelled order's payment completes anyway: an orphan
        payment = payment_completed(order_ids[index], f"op-{index}")
        world.publish(PAYMENT_TOPIC, payment)
        world.publish(PAYMENT_TOPIC, payment)  # SNS delivers at least once
    pump.run()

    statuses = [world.status(order_id) for order_id in order_ids]
    expected = ["RESERVED"] * ORDERS
    expected[CANCELLED], expected[REJECTED] = "CANCELLED", "REJECTED"
    for index in PAID:
        expected[index] = "PAID"
    assert statuses == expected

    # Stock moved once per order: what the reserved orders hold, nothing for the cancelled (released)
    # and the rejected one (its transaction took nothing, not even its SKU-A).
    holding = [i for i in range(ORDERS) if i not in (CANCELLED, REJECTED)]
    taken_a = sum(1 + i % 3 for i in holding)
    assert world.stock("SKU-A") == (1000 - taken_a, taken_a)
    assert world.stock("SKU-B") == (1000 - 2 * len(holding), 2 * len(holding))
    assert world.stock("SKU-LAST") == (1, 0)
    released = world.reservation(order_ids[CANCELLED])
    assert released is not None and released["status"] == "RELEASED"
    assert world.reservation(order_ids[REJECTED]) is None

    # One event per fact; the customer heard each notified one exactly once.
    events = [env for order_id in order_ids for env in world.outbox(order_id)]
    counts = {t: sum(e.event_type == t for e in events) for t in {e.event_type for e in events}}
    assert counts == {"OrderCreated": ORDERS, "OrderCancelled": 1, "OrderRejected": 1, "OrderPaid": len(PAID)}
    notified = {e.event_id for e in events if e.event_type in ("OrderCreated", "OrderPaid", "OrderRejected")}
    assert webhook.deliveries_by_key() == dict.fromkeys(notified, 1)

    # Analytics (SNS -> Firehose -> S3) holds every event; SNS delivered each publish, and every stream
    # batch was published twice, so each event is there twice, read back once, the copies identical.
    archive = world.archive()
    assert set(archive.events) == {e.event_id for e in events}
    assert set(archive.copies.values()) == {2}
    assert not archive.conflicts and not archive.unreadable
    archived = {event_id: envelope.to_json() for event_id, envelope in archive.events.items()}
    assert archived == {e.event_id: e.to_json() for e in events}

    # Each paid order shipped once: one shipment under its key, recorded on the order; none for the
    # cancelled and the rejected one.
    paid_ids = [order_ids[i] for i in PAID]
    assert shipping.shipments_by_order() == dict.fromkeys(paid_ids, 1)
    assert shipping.shipments() == {f"{order_id}:shipment": 1 for order_id in paid_ids}
    for order_id in paid_ids:
        recorded = (world.order(order_id) or {}).get("shipment") or {}
        assert recorded.get("status") == "REQUESTED"
        assert recorded.get("shipmentId") == (shipping.shipment_for(order_id) or {}).get("shipmentId")
    assert "shipment" not in (world.order(order_ids[CANCELLED]) or {})

    # The cancelled order's payment is recorded once, not applied.
    (orphan,) = world.orphan_payments(order_ids[CANCELLED])
    assert orphan["operationId"] == f"op-{CANCELLED}"

    for name, queue in world.queues.items():
        assert world.receive_all(queue.dlq_url) == [], f"{name}: nothing may be parked"
        assert world.receive_all(queue.url) == [], f"{name}: everything must be consumed"
