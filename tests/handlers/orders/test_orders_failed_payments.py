"""Failed payments: a payment that failed, or that its client cancelled, cancels its still-open order,
records why, and releases the reserved stock through OrderCancelled -- once; a closed or paid order is
left as it is."""

from __future__ import annotations

from tests.handlers.orders.api_client import placed_order
from tests.handlers.orders.world import (
    FAILED_PAYMENTS,
    INVENTORY,
    PAID_ORDERS,
    SUBSCRIPTIONS,
    OrdersWorld,
    deliver,
    failed_ids,
    operation_cancelled,
    payment_completed,
    payment_failed,
)


def test_failed_payments_hear_payment_failed_and_operation_cancelled_only() -> None:
    assert SUBSCRIPTIONS[FAILED_PAYMENTS].filter_policy == {
        "eventType": ["PaymentFailed", "OperationCancelled"],
        "order": ["yes"],
    }


def test_a_cancelled_payment_cancels_the_reserved_order_and_releases_its_stock_once(
    world: OrdersWorld,
) -> None:
    before = world.stock("SKU-MUG")
    order_id = placed_order()
    deliver(world, INVENTORY, *world.outbox(order_id, "OrderCreated"))
    cancelled_payment = operation_cancelled(order_id, "op-7")

    response = deliver(world, FAILED_PAYMENTS, cancelled_payment, cancelled_payment, times=2)

    assert failed_ids(response) == []
    order = world.order(order_id)
    assert order is not None and order["status"] == "CANCELLED"
    assert order["cancellation"]["code"] == "PaymentCancelled"
    assert order["cancellation"]["reason"] == "payment op-7 was cancelled: PaymentCancelled: order changed"
    (cancelled,) = world.outbox(order_id, "OrderCancelled")
    assert cancelled.payload is not None and cancelled.payload["reason"] == "PaymentCancelled"
    deliver(world, INVENTORY, cancelled)
    assert world.stock("SKU-MUG") == before


def test_a_failed_payment_cancels_the_reserved_order_records_why_and_releases_its_stock(
    world: OrdersWorld,
) -> None:
    before = world.stock("SKU-MUG")
    order_id = placed_order()
    deliver(world, INVENTORY, *world.outbox(order_id, "OrderCreated"))
    assert world.reservation(order_id) is not None
    failure = payment_failed(order_id, "op-1")

    response = deliver(world, FAILED_PAYMENTS, failure)

    assert failed_ids(response) == []
    order = world.order(order_id)
    assert order is not None and order["status"] == "CANCELLED"
    assert order["cancellation"]["code"] == "PaymentFailed"
    assert order["cancellation"]["operationId"] == "op-1"
    assert "PaymentRejected" in order["cancellation"]["reason"]
    (cancelled,) = world.outbox(order_id, "OrderCancelled")
    assert cancelled.payload is not None and cancelled.payload["reason"] == "PaymentFailed"
    assert cancelled.causation_id == failure.event_id

    deliver(world, INVENTORY, cancelled)

    assert world.reservation(order_id)["status"] == "RELEASED"  # type: ignore[index]
    assert world.stock("SKU-MUG") == before


def test_a_duplicate_failure_cancels_once(world: OrdersWorld) -> None:
    order_id = placed_order()
    failure = payment_failed(order_id, "op-1")

    deliver(world, FAILED_PAYMENTS, failure, failure, times=2)

    assert len(world.outbox(order_id, "OrderCancelled")) == 1
    order = world.order(order_id)
    assert order is not None and order["version"] == 2
    assert world.parked(FAILED_PAYMENTS) == []


def test_a_failure_for_a_paid_order_changes_nothing(world: OrdersWorld) -> None:
    order_id = placed_order()
    deliver(world, PAID_ORDERS, payment_completed(order_id, "op-1"))

    response = deliver(world, FAILED_PAYMENTS, payment_failed(order_id, "op-2"))

    assert failed_ids(response) == []
    order = world.order(order_id)
    assert order is not None and order["status"] == "PAID" and "cancellation" not in order
    assert world.outbox(order_id, "OrderCancelled") == []


def test_a_failed_payment_without_an_order_is_acknowledged_and_ignored(world: OrdersWorld) -> None:
    response = deliver(world, FAILED_PAYMENTS, payment_failed(None, "op-1"))

    assert failed_ids(response) == []
    assert world.parked(FAILED_PAYMENTS) == []
