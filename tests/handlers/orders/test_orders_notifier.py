"""The notifier: the customer hears about each order event once, whatever SQS redelivers."""

from __future__ import annotations

from local.fakes.webhook import WebhookFake
from relay.envelope import Envelope, new_envelope
from relay.unwrap import envelope_from_sqs_record
from tests.handlers.orders.world import NOTIFICATIONS, OrdersWorld, deliver, failed_ids, redeliver


def order_event(
    event_type: str, order_id: str = "ord-1", step: str | None = None, **payload: object
) -> Envelope:
    return new_envelope(
        event_type,
        identity=[order_id, step or event_type.removeprefix("Order").lower()],
        ids={"orderId": order_id},
        payload={"customerId": "cust-7", **payload},
        correlation_id="corr-1",
    )


CREATED = order_event("OrderCreated", currency="EUR", items=[{"sku": "SKU-MUG", "quantity": 2}])
PAID = order_event("OrderPaid", operationId="op-1", paymentId="pay-1")
REJECTED = order_event(
    "OrderRejected", step="rejected", code="InsufficientStock", reason="insufficient stock", sku="SKU-MUG"
)


def test_order_created_is_posted_with_the_order_and_the_event_id_as_idempotency_key(
    world: OrdersWorld, webhook: WebhookFake
) -> None:
    response = deliver(world, NOTIFICATIONS, CREATED)

    assert failed_ids(response) == []
    (delivery,) = webhook.deliveries()
    assert delivery["path"] == "/orders"
    assert delivery["headers"]["idempotency-key"] == CREATED.event_id
    assert delivery["body"] == {
        "orderId": "ord-1",
        "customerId": "cust-7",
        "eventType": "OrderCreated",
        "currency": "EUR",
        "items": [{"sku": "SKU-MUG", "quantity": 2}],
    }


def test_paid_and_rejected_carry_what_the_customer_needs(world: OrdersWorld, webhook: WebhookFake) -> None:
    deliver(world, NOTIFICATIONS, PAID, REJECTED)

    bodies = {d["body"]["eventType"]: d["body"] for d in webhook.deliveries()}
    assert bodies["OrderPaid"] == {
        "orderId": "ord-1",
        "customerId": "cust-7",
        "eventType": "OrderPaid",
        "operationId": "op-1",
    }
    assert bodies["OrderRejected"]["reason"] == "insufficient stock"
    assert bodies["OrderRejected"]["sku"] == "SKU-MUG"


def test_every_notified_event_is_sent_once_across_redelivery(
    world: OrdersWorld, webhook: WebhookFake
) -> None:
    responses = [deliver(world, NOTIFICATIONS, CREATED, PAID, REJECTED, CREATED, times=2) for _ in range(2)]

    assert [failed_ids(r) for r in responses] == [[], []]
    assert webhook.deliveries_by_key() == {CREATED.event_id: 1, PAID.event_id: 1, REJECTED.event_id: 1}
    assert world.parked(NOTIFICATIONS) == []


def test_conflicting_replay_is_a_payload_conflict_parked_and_not_sent(
    world: OrdersWorld, webhook: WebhookFake
) -> None:
    deliver(world, NOTIFICATIONS, REJECTED)
    conflicting = order_event(
        "OrderRejected", step="rejected", code="X", reason="something else", sku="SKU-TEAPOT"
    )
    assert conflicting.event_id == REJECTED.event_id

    response = deliver(world, NOTIFICATIONS, conflicting)

    assert failed_ids(response) == []
    assert world.parked_reasons(NOTIFICATIONS) == ["PayloadConflict"]
    assert webhook.deliveries_by_key() == {REJECTED.event_id: 1}


def test_webhook_outage_is_retried_not_parked_and_then_sent_once(
    world: OrdersWorld, webhook: WebhookFake
) -> None:
    webhook.set_knobs(outage=True)
    first = deliver(world, NOTIFICATIONS, CREATED)
    assert failed_ids(first) == []  # handled (Lambda deletes it): a delayed copy carries the retry
    copy = world.retry_copy(NOTIFICATIONS, attempt=1)
    (record,) = world.lambda_event(NOTIFICATIONS, [copy])["Records"]
    assert envelope_from_sqs_record(record).event_id == CREATED.event_id
    assert world.parked(NOTIFICATIONS) == []

    webhook.set_knobs(outage=False)
    # The copy comes back after its delay; the outage left no IN_PROGRESS record behind.
    second = redeliver(world, NOTIFICATIONS, [copy])

    assert failed_ids(second) == []
    assert webhook.deliveries_by_key() == {CREATED.event_id: 1}
    assert world.parked(NOTIFICATIONS) == []


def test_event_type_outside_the_filter_is_parked_and_not_sent(
    world: OrdersWorld, webhook: WebhookFake
) -> None:
    response = deliver(world, NOTIFICATIONS, order_event("OrderCancelled"))

    assert failed_ids(response) == []
    assert world.parked_reasons(NOTIFICATIONS) == ["InvalidInput"]
    assert webhook.deliveries() == []
