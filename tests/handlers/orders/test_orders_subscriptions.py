"""The fan-out through moto's real SNS -> SQS delivery: every event reaches exactly the queues it should,
and the analytics archive (SNS -> Firehose -> S3, the emulator's patch 14 delivering) gets every event.

The subscriptions are built from ``orders.subscriptions`` (the constants the stack imports), and the
events are published by the real outbox publisher from the orders table's stream records, so both
the filter policies and the ``eventType`` message attribute they match are under test.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from orders.subscriptions import (
    INVENTORY_FILTER,
    NOTIFICATIONS_FILTER,
    ORDER_EVENT_TYPES,
    PAID_ORDERS_FILTER,
)

from relay.envelope import Envelope, new_envelope
from tests.builders import FakeContext, ddb_stream_event, item_insert
from tests.handlers.orders.world import (
    FAILED_PAYMENTS,
    INVENTORY,
    NOTIFICATIONS,
    ORDERS_TABLE,
    PAID_ORDERS,
    PAYMENT_TOPIC,
    SHIPPING,
    OrdersWorld,
    failed_ids,
    operation_cancelled,
    payment_completed,
    payment_failed,
)

EXPECTED = {
    "OrderCreated": {INVENTORY, NOTIFICATIONS},
    "OrderCancelled": {INVENTORY},
    "OrderRejected": {NOTIFICATIONS},
    # OrderPaid also goes to the app's bus, whose shipping rule delivers it to the shipping queue.
    "OrderPaid": {NOTIFICATIONS, SHIPPING},
}


def order_event(event_type: str) -> Envelope:
    return new_envelope(
        event_type,
        identity=["ord-1", event_type],
        ids={"orderId": "ord-1"},
        payload={"customerId": "cust-7"},
        correlation_id="corr-1",
    )


def publish_through_the_outbox(world: OrdersWorld, env: Envelope) -> None:
    from orders.handlers import outbox_publisher

    record = item_insert(
        env,
        keys={"pk": {"S": "ORDER#ord-1"}, "sk": {"S": f"OUTBOX#{env.event_type}#{env.event_id}"}},
        table=ORDERS_TABLE,
    )
    response = outbox_publisher.handler(ddb_stream_event([record]), FakeContext())
    assert failed_ids(response) == []


def bodies(world: OrdersWorld) -> dict[str, list[str]]:
    return {name: [m["Body"] for m in world.receive_all(q.url)] for name, q in world.queues.items()}


def test_filter_policies_are_the_published_contract() -> None:
    assert INVENTORY_FILTER == {"eventType": ["OrderCreated", "OrderCancelled"]}
    assert NOTIFICATIONS_FILTER == {"eventType": ["OrderCreated", "OrderPaid", "OrderRejected"]}
    assert PAID_ORDERS_FILTER == {"eventType": ["PaymentCompleted"], "order": ["yes"]}
    assert set(ORDER_EVENT_TYPES) == set(EXPECTED)


@pytest.mark.parametrize("event_type", sorted(EXPECTED))
def test_order_event_reaches_exactly_its_queues_and_the_archive(world: OrdersWorld, event_type: str) -> None:
    event = order_event(event_type)
    publish_through_the_outbox(world, event)

    reached = {name for name, received in bodies(world).items() if received}

    assert reached == EXPECTED[event_type]
    assert list(world.archive().events) == [event.event_id]


def test_the_archive_gets_the_raw_envelope_and_the_queues_an_sns_notification(world: OrdersWorld) -> None:
    created = order_event("OrderCreated")
    publish_through_the_outbox(world, created)

    received = bodies(world)

    (line,) = world.archived().values()
    assert line == created.to_json().encode() + b"\n"  # raw delivery, one line
    for queue in (INVENTORY, NOTIFICATIONS):
        notification: dict[str, Any] = json.loads(received[queue][0])
        assert notification["Type"] == "Notification"
        assert Envelope.from_json(notification["Message"]) == created
        assert notification["MessageAttributes"]["eventType"]["Value"] == "OrderCreated"


def test_payment_completed_reaches_only_the_paid_orders_queue(world: OrdersWorld) -> None:
    world.publish(PAYMENT_TOPIC, payment_completed("ord-1", "op-1"))

    reached = {name for name, received in bodies(world).items() if received}

    assert reached == {PAID_ORDERS}


@pytest.mark.parametrize("outcome", [payment_failed, operation_cancelled])
def test_payment_failed_and_cancelled_reach_the_failed_payments_queue_only(
    world: OrdersWorld, outcome: Any
) -> None:
    # A failed or cancelled payment releases its order's stock (orders.fulfilment.cancel_unpaid).
    world.publish(PAYMENT_TOPIC, outcome("ord-1", "op-1"))

    reached = {name for name, received in bodies(world).items() if received}

    assert reached == {FAILED_PAYMENTS}


@pytest.mark.parametrize("outcome", [payment_completed, payment_failed, operation_cancelled])
def test_the_outcome_of_a_payment_without_an_order_reaches_no_orders_queue(
    world: OrdersWorld, outcome: Any
) -> None:
    # payments' publisher sets order=no on it (payments.subscriptions.message_attributes), and orders'
    # filters want order=yes: no poll, no invocation of orders' functions for it.
    world.publish(PAYMENT_TOPIC, outcome(None, "op-1"))

    assert {name for name, received in bodies(world).items() if received} == set()


def test_orders_filter_on_the_attribute_payments_sets() -> None:
    from orders.subscriptions import PAYMENT_ORDER_ATTRIBUTE
    from payments.subscriptions import ORDER_ATTRIBUTE, ORDER_EVENTS

    assert PAYMENT_ORDER_ATTRIBUTE == ORDER_ATTRIBUTE
    assert set(ORDER_EVENTS) == {"PaymentCompleted", "PaymentFailed", "OperationCancelled"}


@pytest.mark.parametrize("event_type", ["PaymentRequested", "InvoiceRequested"])
def test_other_payment_events_reach_no_orders_queue(world: OrdersWorld, event_type: str) -> None:
    world.publish(
        PAYMENT_TOPIC,
        new_envelope(
            event_type, identity=["op-1", "x"], ids={"operationId": "op-1"}, payload={}, correlation_id="c"
        ),
    )

    assert {name for name, received in bodies(world).items() if received} == set()


def test_outbox_publisher_publishes_an_items_event_and_ignores_items_without_new_events(
    world: OrdersWorld,
) -> None:
    from orders.handlers import outbox_publisher

    from tests.builders import ddb_stream_record

    created = order_event("OrderCreated")
    without_events = ddb_stream_record(
        "INSERT",
        keys={"pk": {"S": "ORDER#ord-2"}, "sk": {"S": "ORDER"}},
        new_image={"kind": {"S": "order"}, "status": {"S": "CREATED"}},
        table=ORDERS_TABLE,
    )
    keys = {"pk": {"S": "ORDER#ord-1"}, "sk": {"S": "ORDER"}}

    response = outbox_publisher.handler(
        ddb_stream_event([without_events, item_insert(created, keys=keys, table=ORDERS_TABLE)]), FakeContext()
    )

    assert failed_ids(response) == []
    assert sum(len(b) for b in bodies(world).values()) == 2  # one event, two subscribed queues
    assert list(world.archive().events) == [created.event_id]  # and the archive
