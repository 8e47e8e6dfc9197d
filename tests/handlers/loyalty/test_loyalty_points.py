"""The points worker: OrderPaid accrues points once per order, a paid order's OrderRejected reverses
them once, in whatever order and however often the bus rule's queue delivers them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from orders.subscriptions import ORDERS_SOURCE, POINTS_RULE

from emulator.event_patterns import pattern_matches
from relay.envelope import Envelope, new_envelope
from tests.handlers.loyalty.world import (
    LoyaltyWorld,
    body_of,
    bus_event,
    deliver,
    failed_ids,
    get_points,
    order_event,
    order_paid,
    order_rejected,
)

CUSTOMER = "cust-7"
# MUGS (the default lines): 2 mugs and 1 teapot, 3 units; the stage's rule is 10 points per unit.
EARNED = 30


def ledger(customer_id: str = CUSTOMER) -> list[tuple[str, str, int, str]]:
    """(orderId, kind, points, eventId) of the customer's ledger as the API answers it."""
    response = get_points(customer_id)
    assert response["statusCode"] == 200, response
    return [(e["orderId"], e["kind"], e["points"], e["eventId"]) for e in body_of(response)["ledger"]]


def api_balance(customer_id: str = CUSTOMER) -> int:
    response = get_points(customer_id)
    assert response["statusCode"] == 200, response
    return int(body_of(response)["balance"])


def assert_clean(world: LoyaltyWorld) -> None:
    """Nothing parked, nothing waiting for a retry."""
    assert world.parked() == []
    assert world.waiting() == []


# accrual ---------------------------------------------------------------------------------------------


def test_order_paid_accrues_points_once_when_the_same_batch_is_delivered_three_times(
    world: LoyaltyWorld,
) -> None:
    paid = order_paid("ord-1")

    response = deliver(world, paid, times=3)

    assert failed_ids(response) == []
    assert world.balance(CUSTOMER) == EARNED
    assert ledger() == [("ord-1", "ACCRUAL", EARNED, paid.event_id)]
    assert world.markers() == []  # the ledger item is the step's record
    assert_clean(world)


def test_a_republished_order_paid_accrues_nothing_more(world: LoyaltyWorld) -> None:
    paid = order_paid("ord-1")
    deliver(world, paid)

    # The outbox publishing it again: new EventBridge events (new ids), the same envelope -- twice in
    # one batch, too.
    response = deliver(world, paid, paid)

    assert failed_ids(response) == []
    assert world.balance(CUSTOMER) == EARNED
    assert ledger() == [("ord-1", "ACCRUAL", EARNED, paid.event_id)]
    assert_clean(world)


def test_a_second_order_paid_event_for_an_accrued_order_accrues_nothing(world: LoyaltyWorld) -> None:
    first = order_paid("ord-1")
    deliver(world, first)
    other = order_paid("ord-1", identity=["ord-1", "paid-again"])
    assert other.event_id != first.event_id

    response = deliver(world, other)

    assert failed_ids(response) == []
    assert world.balance(CUSTOMER) == EARNED
    assert ledger() == [("ord-1", "ACCRUAL", EARNED, first.event_id)]
    assert_clean(world)


def test_the_accrual_is_recorded_on_the_order_item_and_the_balance(world: LoyaltyWorld) -> None:
    paid = order_paid(
        "ord-1", items=[{"sku": "SKU-MUG", "quantity": 4}, {"sku": "SKU-TEAPOT", "quantity": 3}]
    )

    deliver(world, paid)

    entry = world.order_points(CUSTOMER, "ord-1")
    assert entry is not None
    assert {k: entry[k] for k in ("orderId", "accrued", "accrualEventId")} == {
        "orderId": "ord-1",
        "accrued": 70,
        "accrualEventId": paid.event_id,
    }
    assert entry["accruedAt"].endswith("Z")
    assert "reversedAt" not in entry and "reversed" not in entry
    (balance,) = [i for i in world.items(CUSTOMER) if i["sk"] == "BALANCE"]
    assert balance["balance"] == 70
    assert balance["customerId"] == CUSTOMER
    assert balance["updatedAt"] == entry["accruedAt"]


def test_the_accrual_reads_the_time_from_the_wirings_clock(
    world: LoyaltyWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    import relay.wiring
    from relay.state_machine import now_iso

    stopped = (datetime.now(UTC) - timedelta(minutes=3)).replace(microsecond=456000)
    monkeypatch.setattr(relay.wiring, "utc_now", lambda: stopped)

    deliver(world, order_paid("ord-1"))

    entry = world.order_points(CUSTOMER, "ord-1")
    assert entry is not None and entry["accruedAt"] == now_iso(stopped)


def test_two_orders_of_one_customer_add_up_and_other_customers_are_apart(world: LoyaltyWorld) -> None:
    one = order_paid("ord-1")
    two = order_paid("ord-2", items=[{"sku": "SKU-MUG", "quantity": 4}], operation_id="op-2")
    elsewhere = order_paid("ord-3", customer_id="cust-9", operation_id="op-3")

    response = deliver(world, one, two, elsewhere)

    assert failed_ids(response) == []
    assert world.balance(CUSTOMER) == EARNED + 40
    assert world.balance("cust-9") == EARNED
    assert sorted(ledger()) == sorted(
        [("ord-1", "ACCRUAL", EARNED, one.event_id), ("ord-2", "ACCRUAL", 40, two.event_id)]
    )
    assert ledger("cust-9") == [("ord-3", "ACCRUAL", EARNED, elsewhere.event_id)]


def test_points_per_unit_comes_from_the_environment(
    world: LoyaltyWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    from relay.wiring import reset_all

    assert world.env()["POINTS_PER_UNIT"] == "10"  # the stage config, as the template sets it
    monkeypatch.setenv("POINTS_PER_UNIT", "3")
    reset_all()

    deliver(world, order_paid("ord-1"))

    assert world.balance(CUSTOMER) == 9
    assert [points for _, _, points, _ in ledger()] == [9]


# reversal --------------------------------------------------------------------------------------------


def test_rejection_of_a_paid_order_reverses_its_points_once(world: LoyaltyWorld) -> None:
    paid, rejected = order_paid("ord-1"), order_rejected("ord-1")
    deliver(world, paid)

    first = deliver(world, rejected, times=3)
    again = deliver(world, rejected, rejected)  # re-published

    assert failed_ids(first) == failed_ids(again) == []
    assert world.balance(CUSTOMER) == 0
    assert api_balance() == 0
    assert ledger() == [
        ("ord-1", "ACCRUAL", EARNED, paid.event_id),
        ("ord-1", "REVERSAL", -EARNED, rejected.event_id),
    ]
    entry = world.order_points(CUSTOMER, "ord-1")
    assert entry is not None and entry["reversed"] == EARNED
    assert_clean(world)


def test_a_reversal_before_its_accrual_records_zero_and_the_accrual_is_then_offset(
    world: LoyaltyWorld,
) -> None:
    paid, rejected = order_paid("ord-1"), order_rejected("ord-1")

    deliver(world, rejected)

    reversed_first = world.order_points(CUSTOMER, "ord-1")
    assert reversed_first is not None
    assert reversed_first["reversed"] == 0 and reversed_first["reversalEventId"] == rejected.event_id
    assert "accruedAt" not in reversed_first
    assert api_balance() == 0
    assert ledger() == [("ord-1", "REVERSAL", 0, rejected.event_id)]

    response = deliver(world, paid, times=2)
    late = deliver(world, rejected)  # the reversal again, after the accrual: nothing more

    assert failed_ids(response) == failed_ids(late) == []
    assert world.balance(CUSTOMER) in (None, 0)
    assert api_balance() == 0
    entries = ledger()
    # Oldest first: the reversal came first; it now offsets what the accrual recorded.
    assert entries == [
        ("ord-1", "REVERSAL", -EARNED, rejected.event_id),
        ("ord-1", "ACCRUAL", EARNED, paid.event_id),
    ]
    assert_clean(world)


def test_either_arrival_order_ends_with_the_same_balance(world: LoyaltyWorld) -> None:
    deliver(world, order_paid("ord-1"))
    deliver(world, order_rejected("ord-1"))
    deliver(world, order_rejected("ord-2", payment_operation_id="op-2"))
    deliver(world, order_paid("ord-2", operation_id="op-2"))
    deliver(world, order_paid("ord-3", operation_id="op-3"))  # kept

    assert world.balance(CUSTOMER) == EARNED
    assert api_balance() == EARNED


def test_order_rejected_without_a_payment_is_acknowledged_and_writes_nothing(world: LoyaltyWorld) -> None:
    unpaid = order_rejected("ord-1", payment_operation_id=None)

    response = deliver(world, unpaid, times=2)

    assert failed_ids(response) == []
    assert world.items() == []
    assert world.markers() == []
    assert_clean(world)


def test_order_rejected_without_a_payment_leaves_an_accrual_alone(world: LoyaltyWorld) -> None:
    paid = order_paid("ord-1")
    deliver(world, paid)

    response = deliver(world, order_rejected("ord-1", payment_operation_id=None))

    assert failed_ids(response) == []
    assert world.balance(CUSTOMER) == EARNED
    assert ledger() == [("ord-1", "ACCRUAL", EARNED, paid.event_id)]
    assert_clean(world)


def test_a_paid_order_that_earned_zero_points_can_still_be_rejected(
    world: LoyaltyWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """points_per_unit may be 0 (``loyalty.settings``: ge=0): the accrual records 0 points, and the
    rejection that follows must be recorded (a 0-point reversal) and acknowledged, not retried."""
    from relay.wiring import reset_all

    monkeypatch.setenv("POINTS_PER_UNIT", "0")
    reset_all()
    paid, rejected = order_paid("ord-1"), order_rejected("ord-1")
    deliver(world, paid)

    response = deliver(world, rejected)

    assert failed_ids(response) == []
    assert world.parked() == []
    assert world.waiting() == [], "the reversal of a 0-point accrual was sent back for a retry"
    entry = world.order_points(CUSTOMER, "ord-1")
    assert entry is not None and entry.get("reversalEventId") == rejected.event_id
    assert api_balance() == 0


# poison ----------------------------------------------------------------------------------------------


def _paid_with(**changes: Any) -> Envelope:
    """OrderPaid with its ids or payload changed (``ids=`` replaces the ids; other keys the payload's)."""
    base = order_paid("ord-1")
    ids = changes.pop("ids", base.ids)
    payload = {**(base.payload or {}), **changes}
    payload = {k: v for k, v in payload.items() if v is not None}
    return new_envelope("OrderPaid", identity=["ord-1", "paid"], ids=ids, payload=payload, correlation_id="c")


POISON = {
    "no ids.orderId": (_paid_with(ids={"operationId": "op-1"}), "needs ids.orderId"),
    "no payload.customerId": (_paid_with(customerId=None), "payload.customerId"),
    "no payload.items": (_paid_with(items=None), "has no payload.items"),
    "empty payload.items": (_paid_with(items=[]), "has no payload.items"),
    "quantity 0": (_paid_with(items=[{"sku": "SKU-MUG", "quantity": 0}]), "items[0].quantity"),
    "quantity as text": (_paid_with(items=[{"sku": "SKU-MUG", "quantity": "2"}]), "items[0].quantity"),
    "quantity 1.5": (
        _paid_with(items=[{"sku": "SKU-MUG", "quantity": 1}, {"sku": "SKU-TEAPOT", "quantity": 1.5}]),
        "items[1].quantity",
    ),
    "quantity true": (_paid_with(items=[{"sku": "SKU-MUG", "quantity": True}]), "items[0].quantity"),
    "a line that is not an object": (_paid_with(items=["SKU-MUG"]), "items[0].quantity"),
    "OrderRejected without ids.orderId": (
        new_envelope(
            "OrderRejected",
            identity=["ord-1", "rejected"],
            ids={},
            payload={"customerId": CUSTOMER, "paymentOperationId": "op-1"},
            correlation_id="c",
        ),
        "needs ids.orderId",
    ),
    "an event type the rule does not route": (
        order_event("OrderCreated", "ord-1", items=[{"sku": "SKU-MUG", "quantity": 1}]),
        "loyalty handles OrderPaid and OrderRejected",
    ),
}


@pytest.mark.parametrize(("poison", "reason"), list(POISON.values()), ids=list(POISON))
def test_poison_is_parked_with_its_reason_not_retried_and_writes_nothing(
    world: LoyaltyWorld, poison: Envelope, reason: str
) -> None:
    response = deliver(world, poison)

    assert failed_ids(response) == []
    ((error_class, message),) = world.parked_errors()
    assert error_class == "InvalidInput"
    assert reason in message
    assert world.waiting() == []  # no retry copy
    assert world.items() == []
    assert world.markers() == []


def test_a_body_that_is_not_an_event_is_parked(world: LoyaltyWorld) -> None:
    response = deliver(world, "{not json")

    assert failed_ids(response) == []
    assert len(world.parked()) == 1
    assert world.items() == []


def test_the_same_event_id_with_another_payload_is_parked_as_a_payload_conflict(
    world: LoyaltyWorld,
) -> None:
    paid = order_paid("ord-1")
    deliver(world, paid)
    tampered = order_paid("ord-1", items=[{"sku": "SKU-MUG", "quantity": 9}])
    assert tampered.event_id == paid.event_id

    response = deliver(world, tampered)

    assert failed_ids(response) == []
    assert world.parked_reasons() == ["PayloadConflict"]
    assert world.balance(CUSTOMER) == EARNED
    assert ledger() == [("ord-1", "ACCRUAL", EARNED, paid.event_id)]


def test_a_conflicting_rejection_is_parked_and_reverses_nothing_more(world: LoyaltyWorld) -> None:
    paid, rejected = order_paid("ord-1"), order_rejected("ord-1")
    deliver(world, paid)
    deliver(world, rejected)
    tampered = order_rejected("ord-1", payment_operation_id="op-other")
    assert tampered.event_id == rejected.event_id

    response = deliver(world, tampered)

    assert failed_ids(response) == []
    assert world.parked_reasons() == ["PayloadConflict"]
    assert world.balance(CUSTOMER) == 0


# the bus rule ----------------------------------------------------------------------------------------


def test_the_points_rule_is_provisioned_with_the_published_pattern(world: LoyaltyWorld) -> None:
    rule = world.points_rule()

    assert json.loads(rule["EventPattern"]) == POINTS_RULE
    assert rule["State"] == "ENABLED"
    targets = world.events.list_targets_by_rule(Rule=rule["Name"], EventBusName=rule["EventBusName"])
    assert [t["Arn"] for t in targets["Targets"]] == [world.queue_arn]
    (template_rule,) = [r for r in world.stack.topology.rules if r.name == rule["Name"]]
    assert template_rule.pattern == POINTS_RULE
    # On the app's bus (the core stack's), not the default one.
    assert rule["EventBusName"] != "default"
    assert world.events.describe_event_bus(Name=rule["EventBusName"])["Name"] == rule["EventBusName"]


ROUTED = {
    "OrderPaid": (order_paid("ord-1"), True),
    "OrderRejected of a paid order": (order_rejected("ord-1"), True),
    "OrderRejected of an unpaid order": (order_rejected("ord-1", payment_operation_id=None), False),
    "OrderCreated": (order_event("OrderCreated", "ord-1", items=[{"sku": "SKU-MUG", "quantity": 1}]), False),
    "OrderCancelled": (order_event("OrderCancelled", "ord-1", previousStatus="RESERVED"), False),
}


@pytest.mark.parametrize(("env", "routed"), list(ROUTED.values()), ids=list(ROUTED))
def test_the_provisioned_points_rule_routes_exactly_the_events_that_move_points(
    world: LoyaltyWorld, env: Envelope, routed: bool
) -> None:
    pattern = json.loads(world.points_rule()["EventPattern"])

    assert pattern_matches(pattern, bus_event(env)) is routed
    assert pattern_matches(POINTS_RULE, bus_event(env)) is routed


def test_the_points_rule_hears_only_the_order_service() -> None:
    event = bus_event(order_paid("ord-1"))
    assert event["source"] == ORDERS_SOURCE
    event["source"] = "relay.payments"

    assert pattern_matches(POINTS_RULE, event) is False
