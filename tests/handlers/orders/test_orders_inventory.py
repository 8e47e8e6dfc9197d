"""Inventory: stock is reserved or released exactly once per order; short stock is an outcome."""

from __future__ import annotations

import pytest

from ops.seed_stock import seed_stock
from relay.envelope import new_envelope
from tests.handlers.orders.api_client import cancel, order_request, placed_order
from tests.handlers.orders.conftest import STOCK
from tests.handlers.orders.world import (
    INVENTORY,
    INVENTORY_TABLE,
    PAID_ORDERS,
    OrdersWorld,
    deliver,
    failed_ids,
    payment_completed,
)


def test_order_created_takes_every_line_from_stock_and_marks_the_order_reserved(world: OrdersWorld) -> None:
    order_id = placed_order()  # 2 x SKU-MUG, 1 x SKU-TEAPOT
    (created,) = world.outbox(order_id, "OrderCreated")

    response = deliver(world, INVENTORY, created)

    assert failed_ids(response) == []
    assert world.stock("SKU-MUG") == (STOCK["SKU-MUG"] - 2, 2)
    assert world.stock("SKU-TEAPOT") == (STOCK["SKU-TEAPOT"] - 1, 1)
    reservation = world.reservation(order_id)
    assert reservation is not None and reservation["status"] == "RESERVED"
    assert reservation["items"] == [{"sku": "SKU-MUG", "quantity": 2}, {"sku": "SKU-TEAPOT", "quantity": 1}]
    assert world.status(order_id) == "RESERVED"
    assert world.parked(INVENTORY) == []
    # The order is the step's record (its stock, and the event in ``seen``): no reservation item.
    order = world.order(order_id)
    assert order is not None and order["stock"] == "RESERVED" and created.event_id in order["seen"]
    assert world.reservation_item(order_id) is None


def test_duplicate_order_created_moves_stock_once(world: OrdersWorld) -> None:
    order_id = placed_order()
    (created,) = world.outbox(order_id, "OrderCreated")

    # The same message twice in one batch, that batch delivered twice, then once more on its own.
    deliver(world, INVENTORY, created, created, times=2)
    response = deliver(world, INVENTORY, created)

    assert failed_ids(response) == []
    assert world.stock("SKU-MUG") == (STOCK["SKU-MUG"] - 2, 2)
    assert world.stock("SKU-TEAPOT") == (STOCK["SKU-TEAPOT"] - 1, 1)
    assert world.parked(INVENTORY) == []


def test_insufficient_stock_rejects_the_order_with_order_rejected_and_takes_nothing(
    world: OrdersWorld,
) -> None:
    items = [{"sku": "SKU-MUG", "quantity": 3}, {"sku": "SKU-TEAPOT", "quantity": 6}]
    order_id = placed_order(order_request(items=items))
    (created,) = world.outbox(order_id, "OrderCreated")

    response = deliver(world, INVENTORY, created)

    # An outcome, not a failure: acknowledged, not retried, not parked.
    assert failed_ids(response) == []
    assert world.parked(INVENTORY) == []
    # The whole reservation transaction was cancelled: not even the mugs that were available moved.
    assert world.stock("SKU-MUG") == (STOCK["SKU-MUG"], 0)
    assert world.stock("SKU-TEAPOT") == (STOCK["SKU-TEAPOT"], 0)
    assert world.reservation(order_id) is None
    order = world.order(order_id)
    assert order is not None and order["status"] == "REJECTED"
    assert order["rejection"]["sku"] == "SKU-TEAPOT" and order["rejection"]["code"] == "InsufficientStock"
    (rejected,) = world.outbox(order_id, "OrderRejected")
    assert rejected.payload is not None
    assert rejected.payload["sku"] == "SKU-TEAPOT"
    assert rejected.payload["reason"] == "insufficient stock for SKU SKU-TEAPOT: 6 requested, 5 available"
    assert (rejected.payload["requested"], rejected.payload["available"]) == (6, 5)
    assert rejected.causation_id == created.event_id


def test_sku_without_stock_rejects_the_order_as_not_stocked(world: OrdersWorld) -> None:
    order_id = placed_order(order_request(items=[{"sku": "SKU-UNHEARD-OF", "quantity": 1}]))

    response = deliver(world, INVENTORY, *world.outbox(order_id, "OrderCreated"))

    assert failed_ids(response) == []
    assert world.status(order_id) == "REJECTED"
    (rejected,) = world.outbox(order_id, "OrderRejected")
    assert rejected.payload is not None and rejected.payload["code"] == "UnknownSku"
    assert world.stock("SKU-UNHEARD-OF") is None  # a failed condition never creates the item


def test_redelivered_rejection_rejects_once_and_publishes_order_rejected_once(world: OrdersWorld) -> None:
    order_id = placed_order(order_request(items=[{"sku": "SKU-LAST", "quantity": 2}]))
    (created,) = world.outbox(order_id, "OrderCreated")

    deliver(world, INVENTORY, created, created, times=3)

    assert len(world.outbox(order_id, "OrderRejected")) == 1
    order = world.order(order_id)
    assert order is not None and [s for s, _ in world.history(order_id)] == ["CREATED", "REJECTED"]
    assert world.parked(INVENTORY) == []


def test_the_last_unit_goes_to_one_order_and_the_other_is_rejected(world: OrdersWorld) -> None:
    first = placed_order(order_request(items=[{"sku": "SKU-LAST", "quantity": 1}]))
    second = placed_order(order_request(items=[{"sku": "SKU-LAST", "quantity": 1}]))

    deliver(world, INVENTORY, *world.outbox(first, "OrderCreated"), *world.outbox(second, "OrderCreated"))

    assert (world.status(first), world.status(second)) == ("RESERVED", "REJECTED")
    assert world.stock("SKU-LAST") == (0, 1)


def test_order_cancelled_releases_exactly_what_was_reserved_once(world: OrdersWorld) -> None:
    order_id = placed_order()
    deliver(world, INVENTORY, *world.outbox(order_id, "OrderCreated"))
    assert cancel(order_id)["statusCode"] == 200
    (cancelled,) = world.outbox(order_id, "OrderCancelled")

    deliver(world, INVENTORY, cancelled, cancelled, times=2)
    response = deliver(world, INVENTORY, cancelled)

    assert failed_ids(response) == []
    assert world.stock("SKU-MUG") == (STOCK["SKU-MUG"], 0)
    assert world.stock("SKU-TEAPOT") == (STOCK["SKU-TEAPOT"], 0)
    reservation = world.reservation(order_id)
    assert reservation is not None and reservation["status"] == "RELEASED"
    assert world.parked(INVENTORY) == []


def test_release_gives_back_the_reservation_not_what_the_event_claims(world: OrdersWorld) -> None:
    order_id = placed_order()  # reserves 2 mugs and 1 teapot
    deliver(world, INVENTORY, *world.outbox(order_id, "OrderCreated"))
    cancel(order_id)
    (cancelled,) = world.outbox(order_id, "OrderCancelled")
    # A restock between reservation and release (the seeding tool keeps what is reserved) must be
    # neither undone nor doubled: the release adds exactly the 2 mugs the reservation took.
    seed_stock({"SKU-MUG": 50}, table=INVENTORY_TABLE, ddb_client=world.ddb)

    deliver(world, INVENTORY, cancelled)

    assert world.stock("SKU-MUG") == (52, 0)
    assert world.stock("SKU-TEAPOT") == (STOCK["SKU-TEAPOT"], 0)


def test_cancelled_before_reservation_releases_nothing_and_the_late_order_created_reserves_nothing(
    world: OrdersWorld,
) -> None:
    order_id = placed_order()
    cancel(order_id)
    (created,) = world.outbox(order_id, "OrderCreated")
    (cancelled,) = world.outbox(order_id, "OrderCancelled")

    # SQS does not keep order: the cancellation arrives first.
    deliver(world, INVENTORY, cancelled)
    response = deliver(world, INVENTORY, created)

    assert failed_ids(response) == []
    assert world.reservation(order_id) is None
    assert world.stock("SKU-MUG") == (STOCK["SKU-MUG"], 0)
    assert world.status(order_id) == "CANCELLED"
    assert world.parked(INVENTORY) == []


def test_order_paid_before_its_reservation_stays_paid_and_gets_its_stock(world: OrdersWorld) -> None:
    order_id = placed_order()
    deliver(world, PAID_ORDERS, payment_completed(order_id, "op-1"))

    deliver(world, INVENTORY, *world.outbox(order_id, "OrderCreated"))

    assert world.status(order_id) == "PAID"
    assert world.stock("SKU-MUG") == (STOCK["SKU-MUG"] - 2, 2)
    reservation = world.reservation(order_id)
    assert reservation is not None and reservation["status"] == "RESERVED"


def test_order_paid_before_stock_ran_out_is_rejected_with_the_payment_for_a_refund(
    world: OrdersWorld,
) -> None:
    order_id = placed_order(order_request(items=[{"sku": "SKU-LAST", "quantity": 2}]))
    deliver(world, PAID_ORDERS, payment_completed(order_id, "op-1"))

    deliver(world, INVENTORY, *world.outbox(order_id, "OrderCreated"))

    assert world.status(order_id) == "REJECTED"
    (rejected,) = world.outbox(order_id, "OrderRejected")
    assert rejected.payload is not None and rejected.payload["paymentOperationId"] == "op-1"


def test_conflicting_replay_of_order_created_is_parked_as_payload_conflict_and_takes_nothing_more(
    world: OrdersWorld,
) -> None:
    order_id = placed_order()
    (created,) = world.outbox(order_id, "OrderCreated")
    deliver(world, INVENTORY, created)
    # Same eventId (same identity), other items: a producer bug or a tampered redrive.
    tampered = new_envelope(
        "OrderCreated",
        identity=[order_id, "created"],
        ids={"orderId": order_id},
        payload={**(created.payload or {}), "items": [{"sku": "SKU-MUG", "quantity": 9}]},
        correlation_id=created.correlation_id,
    )
    assert tampered.event_id == created.event_id

    response = deliver(world, INVENTORY, tampered)

    assert failed_ids(response) == []
    assert world.parked_reasons(INVENTORY) == ["PayloadConflict"]
    assert world.stock("SKU-MUG") == (STOCK["SKU-MUG"] - 2, 2)


def test_order_cancelled_for_an_order_that_is_not_cancelled_is_parked_and_releases_nothing(
    world: OrdersWorld,
) -> None:
    order_id = placed_order()
    deliver(world, INVENTORY, *world.outbox(order_id, "OrderCreated"))
    bogus = new_envelope(
        "OrderCancelled",
        identity=[order_id, "cancelled"],
        ids={"orderId": order_id},
        payload={"customerId": "cust-7"},
        correlation_id="corr-bogus",
    )

    response = deliver(world, INVENTORY, bogus)

    assert failed_ids(response) == []
    assert world.parked_reasons(INVENTORY) == ["IllegalTransition"]
    assert world.stock("SKU-MUG") == (STOCK["SKU-MUG"] - 2, 2)
    assert world.status(order_id) == "RESERVED"


def test_order_created_for_an_unknown_order_is_parked(world: OrdersWorld) -> None:
    ghost = new_envelope(
        "OrderCreated",
        identity=["ord-ghost", "created"],
        ids={"orderId": "ord-ghost"},
        payload={"customerId": "c", "currency": "EUR", "items": [{"sku": "SKU-MUG", "quantity": 1}]},
        correlation_id="corr-ghost",
    )

    response = deliver(world, INVENTORY, ghost)

    assert failed_ids(response) == []
    assert world.parked_reasons(INVENTORY) == ["UnknownOrder"]
    assert world.stock("SKU-MUG") == (STOCK["SKU-MUG"], 0)


@pytest.mark.parametrize("event_type", ["OrderPaid", "OrderRejected"])
def test_event_type_outside_the_filter_is_parked_as_invalid_input(
    world: OrdersWorld, event_type: str
) -> None:
    order_id = placed_order()
    stray = new_envelope(
        event_type,
        identity=[order_id, "x"],
        ids={"orderId": order_id},
        payload={"customerId": "c"},
        correlation_id="corr-x",
    )

    deliver(world, INVENTORY, stray)

    assert world.parked_reasons(INVENTORY) == ["InvalidInput"]
