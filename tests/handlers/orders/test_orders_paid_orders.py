"""Paid orders: a completed payment makes its order PAID once; one that cannot is an orphan, recorded."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from tests.handlers.orders.api_client import cancel, order_request, placed_order
from tests.handlers.orders.world import (
    INVENTORY,
    PAID_ORDERS,
    OrdersWorld,
    deliver,
    failed_ids,
    payment_completed,
)


def emitted_metrics(out: str, name: str) -> int:
    """Sum of an EMF metric the kernel printed (relay.observability)."""
    total = 0
    for line in out.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            document = json.loads(line)
            total += int(document.get(name, 0))
    return total


def test_payment_completed_marks_the_order_paid_and_publishes_order_paid(world: OrdersWorld) -> None:
    order_id = placed_order()
    payment = payment_completed(order_id, "op-1", payment_id="pay-9")

    response = deliver(world, PAID_ORDERS, payment)

    assert failed_ids(response) == []
    order = world.order(order_id)
    assert order is not None and order["status"] == "PAID" and order["paymentOperationId"] == "op-1"
    (paid,) = world.outbox(order_id, "OrderPaid")
    assert paid.ids == {"orderId": order_id, "operationId": "op-1"}
    # The lines travel with OrderPaid (shipping ships them, loyalty counts them), as the order has them.
    assert paid.payload == {
        "customerId": "cust-7",
        "operationId": "op-1",
        "paymentId": "pay-9",
        "items": [{"sku": "SKU-MUG", "quantity": 2}, {"sku": "SKU-TEAPOT", "quantity": 1}],
    }
    assert paid.causation_id == payment.event_id


def test_each_order_step_reads_the_time_from_its_wirings_clock(
    world: OrdersWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clock is passed in (``orders.wiring.Wiring.clock``): the order's creation, its reservation and
    its payment carry the moment the wiring's clock gave, in the history and in the event alike."""
    import relay.wiring
    from relay.state_machine import now_iso

    stopped = (datetime.now(UTC) + timedelta(minutes=7)).replace(microsecond=123000)
    at = now_iso(stopped)
    monkeypatch.setattr(relay.wiring, "utc_now", lambda: stopped)
    order_id = placed_order()
    deliver(world, INVENTORY, *world.outbox(order_id, "OrderCreated"))

    deliver(world, PAID_ORDERS, payment_completed(order_id, "op-1"))

    order = world.order(order_id)
    assert order is not None
    assert world.history(order_id) == [
        ("CREATED", at),
        ("RESERVED", at),
        ("PAID", at),
    ]
    assert order["createdAt"] == order["updatedAt"] == at
    (paid,) = world.outbox(order_id, "OrderPaid")
    assert paid.occurred_at == stopped


def test_payment_for_a_reserved_order_marks_it_paid(world: OrdersWorld) -> None:
    order_id = placed_order()
    deliver(world, INVENTORY, *world.outbox(order_id, "OrderCreated"))

    deliver(world, PAID_ORDERS, payment_completed(order_id, "op-1"))

    order = world.order(order_id)
    assert order is not None
    assert [s for s, _ in world.history(order_id)] == ["CREATED", "RESERVED", "PAID"]


def test_duplicate_payment_completed_pays_once_and_publishes_order_paid_once(world: OrdersWorld) -> None:
    order_id = placed_order()
    payment = payment_completed(order_id, "op-1")

    deliver(world, PAID_ORDERS, payment, payment, times=2)
    response = deliver(world, PAID_ORDERS, payment)

    assert failed_ids(response) == []
    assert len(world.outbox(order_id, "OrderPaid")) == 1
    order = world.order(order_id)
    assert order is not None and order["version"] == 2
    assert world.orphan_payments(order_id) == []
    assert world.parked(PAID_ORDERS) == []


def test_payment_without_an_order_id_is_acknowledged_and_ignored(world: OrdersWorld) -> None:
    response = deliver(world, PAID_ORDERS, payment_completed(None, "op-1"))

    assert failed_ids(response) == []
    assert world.parked(PAID_ORDERS) == []
    assert world.ddb.scan(TableName="orders-orders")["Items"] == []


def test_payment_for_an_unknown_order_is_recorded_as_orphan_counted_and_acknowledged(
    world: OrdersWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()

    response = deliver(world, PAID_ORDERS, payment_completed("ord-ghost", "op-1"))

    assert failed_ids(response) == []
    assert world.parked(PAID_ORDERS) == []
    (orphan,) = world.orphan_payments("ord-ghost")
    assert orphan["sk"] == "PAYMENT#op-1"
    assert orphan["status"] == "ORPHANED"
    assert orphan["reason"] == "order ord-ghost does not exist"
    assert emitted_metrics(capsys.readouterr().out, "OrphanPayment") == 1


@pytest.mark.parametrize("how", ["cancelled", "rejected"])
def test_payment_for_a_cancelled_or_rejected_order_is_an_orphan_and_the_order_is_unchanged(
    world: OrdersWorld, how: str
) -> None:
    if how == "cancelled":
        order_id = placed_order()
        cancel(order_id)
    else:
        order_id = placed_order(order_request(items=[{"sku": "SKU-LAST", "quantity": 5}]))
        deliver(world, INVENTORY, *world.outbox(order_id, "OrderCreated"))
    status = world.status(order_id)

    response = deliver(world, PAID_ORDERS, payment_completed(order_id, "op-1"))

    assert failed_ids(response) == []
    assert world.status(order_id) == status == how.upper()
    (orphan,) = world.orphan_payments(order_id)
    assert orphan["reason"] == f"order {order_id} is {how.upper()}; a payment cannot be applied to it"
    assert orphan["orderStatus"] == how.upper()
    assert world.outbox(order_id, "OrderPaid") == []


def test_second_payment_for_a_paid_order_is_an_orphan(world: OrdersWorld) -> None:
    order_id = placed_order()
    deliver(world, PAID_ORDERS, payment_completed(order_id, "op-1"))

    deliver(world, PAID_ORDERS, payment_completed(order_id, "op-2"))

    order = world.order(order_id)
    assert order is not None and order["paymentOperationId"] == "op-1"
    (orphan,) = world.orphan_payments(order_id)
    assert orphan["operationId"] == "op-2"
    assert "already paid by operation op-1" in orphan["reason"]
    assert len(world.outbox(order_id, "OrderPaid")) == 1


def test_redelivered_orphan_payment_is_recorded_and_counted_once(
    world: OrdersWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    payment = payment_completed("ord-ghost", "op-1")
    capsys.readouterr()

    deliver(world, PAID_ORDERS, payment, payment, times=3)

    assert len(world.orphan_payments("ord-ghost")) == 1
    assert emitted_metrics(capsys.readouterr().out, "OrphanPayment") == 1
    assert world.parked(PAID_ORDERS) == []


def test_conflicting_replay_of_payment_completed_is_parked_as_payload_conflict(world: OrdersWorld) -> None:
    order_id = placed_order()
    deliver(world, PAID_ORDERS, payment_completed(order_id, "op-1", payment_id="pay-1"))
    conflicting = payment_completed(order_id, "op-1", payment_id="pay-OTHER")

    response = deliver(world, PAID_ORDERS, conflicting)

    assert failed_ids(response) == []
    assert world.parked_reasons(PAID_ORDERS) == ["PayloadConflict"]
    assert len(world.outbox(order_id, "OrderPaid")) == 1


def test_event_type_outside_the_filter_is_parked(world: OrdersWorld) -> None:
    from relay.envelope import new_envelope

    stray = new_envelope(
        "PaymentRequested",
        identity=["op-1", "r"],
        ids={"operationId": "op-1"},
        payload={},
        correlation_id="c",
    )

    deliver(world, PAID_ORDERS, stray)

    assert world.parked_reasons(PAID_ORDERS) == ["InvalidInput"]
