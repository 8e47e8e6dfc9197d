"""GET /customers/{customerId}/points: the balance and the ledger (oldest first); 400 when unreadable."""

from __future__ import annotations

import time

import pytest

from tests.handlers.loyalty.world import LoyaltyWorld, body_of, deliver, get_points, order_paid

CUSTOMER = "cust-7"


def accrue(world: LoyaltyWorld, *orders: tuple[str, int]) -> list[str]:
    """Accrue (orderId, units) one delivery after the other; returns the events' ids."""
    ids = []
    for order_id, units in orders:
        paid = order_paid(
            order_id, items=[{"sku": "SKU-MUG", "quantity": units}], operation_id=f"op-{order_id}"
        )
        deliver(world, paid)
        ids.append(paid.event_id)
        time.sleep(0.002)  # distinct millisecond timestamps, so "oldest first" is well defined
    return ids


def test_get_points_answers_the_balance_and_the_ledger_oldest_first(world: LoyaltyWorld) -> None:
    # ord-b is accrued before ord-a: the ledger is in time order, not in key order.
    first, second = accrue(world, ("ord-b", 1), ("ord-a", 4))

    response = get_points(CUSTOMER)

    assert response["statusCode"] == 200
    body = body_of(response)
    assert body["customerId"] == CUSTOMER
    assert body["balance"] == 50
    assert body["truncated"] is False
    assert [(e["orderId"], e["kind"], e["points"], e["eventId"]) for e in body["ledger"]] == [
        ("ord-b", "ACCRUAL", 10, first),
        ("ord-a", "ACCRUAL", 40, second),
    ]
    stamps = [e["at"] for e in body["ledger"]]
    assert stamps == sorted(stamps) and all(at.endswith("Z") for at in stamps)
    assert set(body["ledger"][0]) == {"orderId", "kind", "points", "at", "eventId"}


def test_get_points_shows_only_the_customers_own_orders(world: LoyaltyWorld) -> None:
    accrue(world, ("ord-1", 1))
    deliver(world, order_paid("ord-2", customer_id="cust-9", operation_id="op-2"))

    body = body_of(get_points(CUSTOMER))

    assert body["balance"] == 10
    assert [e["orderId"] for e in body["ledger"]] == ["ord-1"]


def test_an_unknown_customer_has_a_balance_of_zero_and_an_empty_ledger(world: LoyaltyWorld) -> None:
    response = get_points("cust-new")

    assert response["statusCode"] == 200
    assert body_of(response) == {"customerId": "cust-new", "balance": 0, "ledger": [], "truncated": False}


def test_limit_caps_the_orders_in_the_ledger_and_says_it_truncated(world: LoyaltyWorld) -> None:
    accrue(world, ("ord-1", 1), ("ord-2", 2), ("ord-3", 3))

    body = body_of(get_points(CUSTOMER, limit="2"))

    assert body["balance"] == 60  # the balance is the whole account's
    assert [e["orderId"] for e in body["ledger"]] == ["ord-1", "ord-2"]
    assert body["truncated"] is True
    assert body_of(get_points(CUSTOMER, limit="3"))["truncated"] is False


def test_a_customer_id_in_the_orders_pattern_is_accepted(world: LoyaltyWorld) -> None:
    customer = "acme.eu:team@x-7_b"
    deliver(world, order_paid("ord-1", customer_id=customer))

    response = get_points(customer)

    assert response["statusCode"] == 200, response
    assert body_of(response)["balance"] == 30


@pytest.mark.parametrize(
    ("customer_id", "query", "field"),
    [
        ("-cust", {}, "customerId"),  # must start with a letter or digit
        ("_cust", {}, "customerId"),
        ("c" * 129, {}, "customerId"),
        (CUSTOMER, {"limit": "0"}, "limit"),
        (CUSTOMER, {"limit": "1001"}, "limit"),
        (CUSTOMER, {"limit": "-3"}, "limit"),
        (CUSTOMER, {"limit": "ten"}, "limit"),
        (CUSTOMER, {"limit": "2.5"}, "limit"),
    ],
)
def test_an_invalid_customer_id_or_limit_is_400_with_the_field_and_never_5xx(
    world: LoyaltyWorld, customer_id: str, query: dict[str, str], field: str
) -> None:
    response = get_points(customer_id, **query)

    assert response["statusCode"] == 400, response
    error = body_of(response)
    assert error["error"] == "ValidationError"
    assert [f["field"] for f in error["fields"]] == [field]
    assert all(f["message"] for f in error["fields"])


def test_both_invalid_are_both_reported(world: LoyaltyWorld) -> None:
    response = get_points("-cust", limit="0")

    assert response["statusCode"] == 400
    assert sorted(f["field"] for f in body_of(response)["fields"]) == ["customerId", "limit"]


@pytest.mark.parametrize(
    "path", ["/customers/cust-7/points/extra", "/customers/cust%207/points", "/customers"]
)
def test_a_path_the_router_cannot_match_is_4xx_never_5xx(world: LoyaltyWorld, path: str) -> None:
    from loyalty.handlers import api

    from tests.builders import FakeContext
    from tests.handlers.loyalty.world import http_event

    response = api.handler(http_event("GET", path), FakeContext())

    assert 400 <= response["statusCode"] < 500, response
