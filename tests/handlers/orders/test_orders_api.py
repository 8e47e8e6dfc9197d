"""POST /orders, GET /orders/{orderId}, POST /orders/{orderId}/cancel: the HTTP side of orders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builders import FakeContext
from tests.handlers.hostile_http import assert_refused, hostile_bodies, readable_encodings, with_body
from tests.handlers.orders.api_client import (
    body_of,
    cancel,
    get_order,
    http_event,
    order_request,
    placed_order,
    post_order,
)
from tests.handlers.orders.world import (
    IDEMPOTENCY_TABLE,
    INVENTORY,
    ORDERS_TABLE,
    PAID_ORDERS,
    OrdersWorld,
    deliver,
    payment_completed,
)

OPENAPI = Path(__file__).resolve().parents[3] / "functions" / "orders" / "openapi.json"


def _nothing_stored(world: OrdersWorld) -> None:
    assert world.ddb.scan(TableName=ORDERS_TABLE)["Items"] == []
    assert world.ddb.scan(TableName=IDEMPOTENCY_TABLE)["Items"] == []


def _writes(calls: list[str]) -> list[str]:
    return [c.split(".")[-1] for c in calls if not c.endswith(("GetItem", "Query"))]


@pytest.fixture
def ddb_calls(world: OrdersWorld) -> list[str]:
    """The DynamoDB requests the API function's own client sends."""
    from orders.wiring import wiring

    calls: list[str] = []

    def count(request: Any, **_: Any) -> None:
        target = request.headers["X-Amz-Target"]
        calls.append(target.decode() if isinstance(target, bytes) else target)

    wiring().ddb.meta.events.register("before-send.dynamodb.*", count)
    return calls


def test_post_order_answers_201_with_the_created_order_and_its_location(world: OrdersWorld) -> None:
    response = post_order(order_request())

    assert response["statusCode"] == 201
    order = body_of(response)
    assert response["headers"]["Location"] == f"/orders/{order['orderId']}"
    assert order["status"] == "CREATED"
    assert order["customerId"] == "cust-7" and order["currency"] == "EUR"
    assert order["items"] == [{"sku": "SKU-MUG", "quantity": 2}, {"sku": "SKU-TEAPOT", "quantity": 1}]
    assert [h["status"] for h in order["history"]] == ["CREATED"]


def test_post_order_writes_the_order_with_its_order_created_in_one_put(
    world: OrdersWorld, ddb_calls: list[str]
) -> None:
    order_id = placed_order()

    assert _writes(ddb_calls) == ["PutItem"]
    item = world.order(order_id)
    assert item is not None and item["status"] == "CREATED" and item["version"] == 1
    (created,) = world.outbox(order_id)
    assert created.event_type == "OrderCreated"
    assert created.ids == {"orderId": order_id}
    assert created.payload == {
        "customerId": "cust-7",
        "currency": "EUR",
        "items": [{"sku": "SKU-MUG", "quantity": 2}, {"sku": "SKU-TEAPOT", "quantity": 1}],
    }


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (order_request(customerId=None), "customerId"),
        (order_request(items=[]), "items"),
        (order_request(items=[{"sku": "SKU-MUG", "quantity": 0}]), "items.0.quantity"),
        (order_request(items=[{"sku": "SKU-MUG", "quantity": "2"}]), "items.0.quantity"),
        (order_request(items=[{"sku": "bad sku!", "quantity": 1}]), "items.0.sku"),
        (order_request(currency="eur"), "currency"),
        (order_request(coupon="FREE"), "coupon"),
    ],
    ids=[
        "no-customer",
        "no-items",
        "zero-quantity",
        "string-quantity",
        "bad-sku",
        "currency",
        "extra",
    ],
)
def test_invalid_order_is_400_with_field_errors_and_nothing_stored(
    world: OrdersWorld, body: dict[str, Any], field: str
) -> None:
    response = post_order(body)

    assert response["statusCode"] == 400
    error = body_of(response)
    assert error["error"] == "ValidationError"
    assert field in [f["field"] for f in error["fields"]], error
    _nothing_stored(world)


def test_body_that_is_not_json_is_400_and_nothing_stored(world: OrdersWorld) -> None:
    response = post_order("{not json")

    assert response["statusCode"] == 400
    _nothing_stored(world)


def test_more_items_than_the_documented_maximum_is_400_and_the_maximum_is_accepted(
    world: OrdersWorld,
) -> None:
    from orders.settings import MAX_ORDER_ITEMS

    items = [{"sku": f"SKU-{n}", "quantity": 1} for n in range(MAX_ORDER_ITEMS + 1)]

    response = post_order(order_request(items=items))

    assert response["statusCode"] == 400
    assert [f["field"] for f in body_of(response)["fields"]] == ["items"]
    _nothing_stored(world)
    assert post_order(order_request(items=items[:MAX_ORDER_ITEMS]))["statusCode"] == 201


@pytest.mark.parametrize("hostile", hostile_bodies(order_request(), max_body_bytes=64 * 1024))
def test_a_body_the_api_cannot_read_is_4xx_never_5xx_and_nothing_is_stored(
    world: OrdersWorld, hostile: tuple[dict[str, object], dict[str, str], int, str]
) -> None:
    from orders.handlers import api

    fields, headers, status, error = hostile
    response = api.handler(with_body(http_event("POST", "/orders"), fields, headers), FakeContext())

    assert_refused(response, status, error)
    _nothing_stored(world)


@pytest.mark.parametrize("encoding", readable_encodings(order_request()))
def test_a_valid_body_is_accepted_however_api_gateway_encodes_it(
    world: OrdersWorld, encoding: tuple[dict[str, object], dict[str, str | None]]
) -> None:
    from orders.handlers import api

    fields, headers = encoding
    response = api.handler(with_body(http_event("POST", "/orders"), fields, headers), FakeContext())

    assert response["statusCode"] == 201, response


def test_a_quantity_written_as_an_integral_number_is_that_integer(world: OrdersWorld) -> None:
    # JSON Schema's integer is any number with a zero fractional part: 2.0 is 2 (the document says integer).
    order_id = placed_order(order_request(items=[{"sku": "SKU-1", "quantity": 2.0}]))

    assert body_of(get_order(order_id))["items"] == [{"sku": "SKU-1", "quantity": 2}]
    for quantity in (2.5, "2", True):
        response = post_order(order_request(items=[{"sku": "SKU-1", "quantity": quantity}]))
        assert response["statusCode"] == 400, quantity


def test_two_lines_of_one_sku_are_accepted_as_sent(world: OrdersWorld) -> None:
    items = [{"sku": "SKU-1", "quantity": 1}, {"sku": "SKU-1", "quantity": 2}]

    order_id = placed_order(order_request(items=items))

    assert body_of(get_order(order_id))["items"] == items


def test_oversized_body_is_413_and_nothing_stored(world: OrdersWorld) -> None:
    response = post_order(order_request(customerId="c" * 70_000))

    assert response["statusCode"] == 413
    _nothing_stored(world)


def test_get_order_returns_the_order(world: OrdersWorld) -> None:
    order_id = placed_order()

    response = get_order(order_id)

    assert response["statusCode"] == 200
    assert body_of(response)["orderId"] == order_id
    assert body_of(response)["status"] == "CREATED"


def test_get_unknown_order_is_404_with_json_error(world: OrdersWorld) -> None:
    response = get_order("00000000-0000-4000-8000-000000000000")

    assert response["statusCode"] == 404
    assert body_of(response)["error"] == "OrderNotFound"


def test_same_idempotency_key_and_body_return_the_same_order_without_a_second_event(
    world: OrdersWorld,
) -> None:
    first = post_order(order_request(), idempotency_key="client-1")
    retry = post_order(order_request(), idempotency_key="client-1")

    assert (first["statusCode"], retry["statusCode"]) == (201, 200)
    order_id = body_of(first)["orderId"]
    assert body_of(retry)["orderId"] == order_id
    assert retry["headers"]["Location"] == f"/orders/{order_id}"
    orders = [i for i in world.ddb.scan(TableName=ORDERS_TABLE)["Items"] if i["sk"]["S"] == "ORDER"]
    assert len(orders) == 1
    assert len(world.outbox(order_id)) == 1


def test_same_idempotency_key_with_a_different_body_is_422_and_nothing_more_stored(
    world: OrdersWorld,
) -> None:
    post_order(order_request(), idempotency_key="client-1")
    before = world.ddb.scan(TableName=ORDERS_TABLE)["Count"]

    response = post_order(order_request(currency="USD"), idempotency_key="client-1")

    assert response["statusCode"] == 422
    assert body_of(response)["error"] == "IdempotencyKeyMismatch"
    assert world.ddb.scan(TableName=ORDERS_TABLE)["Count"] == before


def test_the_same_key_from_two_callers_places_two_orders(world: OrdersWorld) -> None:
    alice = post_order(order_request(), idempotency_key="shared-key", user="alice")
    bob = post_order(order_request(), idempotency_key="shared-key", user="bob")

    assert (alice["statusCode"], bob["statusCode"]) == (201, 201)
    assert body_of(alice)["orderId"] != body_of(bob)["orderId"]


def test_a_put_whose_reply_was_lost_is_answered_as_its_own_replay_even_without_a_key(
    world: OrdersWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK retries a PutItem whose reply was lost; the retry meets the order its first attempt
    wrote, and the client gets that order, not a 422 and not a second order."""
    from orders.wiring import wiring

    ddb = wiring().ddb
    original = ddb.put_item

    def written_then_lost(**kwargs: Any) -> Any:
        original(**kwargs)
        return original(**kwargs)  # the retry: its condition fails on the first attempt's item

    monkeypatch.setattr(ddb, "put_item", written_then_lost)

    response = post_order(order_request())

    assert response["statusCode"] == 200
    order_id = body_of(response)["orderId"]
    assert world.status(order_id) == "CREATED"
    assert [e.event_type for e in world.outbox(order_id)] == ["OrderCreated"]


def test_a_key_bound_before_the_one_write_layout_is_answered_when_the_stage_says_so(
    world: OrdersWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    from relay.request_keys import request_sha256
    from relay.wiring import reset_all

    old = placed_order()
    world.ddb.put_item(  # the request-key item the layout before wrote with the order
        TableName=IDEMPOTENCY_TABLE,
        Item={
            "id": {"S": "request-key#old-key"},
            "kind": {"S": "request-key"},
            "orderId": {"S": old},
            "requestSha256": {"S": request_sha256(order_request())},
        },
    )
    monkeypatch.setenv("REQUEST_KEY_ITEMS", "true")
    reset_all()

    retry = post_order(order_request(), idempotency_key="old-key")
    other = post_order(order_request(currency="USD"), idempotency_key="old-key")

    assert retry["statusCode"] == 200 and body_of(retry)["orderId"] == old
    assert other["statusCode"] == 422


def test_cancel_created_order_writes_cancelled_and_order_cancelled_in_one_update(
    world: OrdersWorld, ddb_calls: list[str]
) -> None:
    order_id = placed_order()
    ddb_calls.clear()

    response = cancel(order_id)

    assert response["statusCode"] == 200
    assert body_of(response)["status"] == "CANCELLED"
    assert _writes(ddb_calls) == ["UpdateItem"]
    assert world.status(order_id) == "CANCELLED"
    (cancelled,) = world.outbox(order_id, "OrderCancelled")
    assert cancelled.payload is not None and cancelled.payload["previousStatus"] == "CREATED"


def test_cancel_reserved_order_is_allowed(world: OrdersWorld) -> None:
    order_id = placed_order()
    deliver(world, INVENTORY, *world.outbox(order_id, "OrderCreated"))
    assert world.status(order_id) == "RESERVED"

    response = cancel(order_id)

    assert response["statusCode"] == 200
    assert world.status(order_id) == "CANCELLED"
    (cancelled,) = world.outbox(order_id, "OrderCancelled")
    assert cancelled.payload is not None and cancelled.payload["previousStatus"] == "RESERVED"


def test_cancel_paid_order_is_409_with_the_reason_and_nothing_written(world: OrdersWorld) -> None:
    order_id = placed_order()
    deliver(world, PAID_ORDERS, payment_completed(order_id, "op-1"))
    assert world.status(order_id) == "PAID"

    response = cancel(order_id)

    assert response["statusCode"] == 409
    assert body_of(response) == {
        "error": "OrderNotCancellable",
        "message": f"order {order_id} is PAID; only CREATED or RESERVED orders can be cancelled",
    }
    assert world.status(order_id) == "PAID"
    assert world.outbox(order_id, "OrderCancelled") == []


def test_cancel_rejected_order_is_409(world: OrdersWorld) -> None:
    order_id = placed_order(order_request(items=[{"sku": "SKU-LAST", "quantity": 2}]))
    deliver(world, INVENTORY, *world.outbox(order_id, "OrderCreated"))
    assert world.status(order_id) == "REJECTED"

    response = cancel(order_id)

    assert response["statusCode"] == 409
    assert "is REJECTED" in body_of(response)["message"]


def test_cancel_unknown_order_is_404(world: OrdersWorld) -> None:
    response = cancel("00000000-0000-4000-8000-000000000000")

    assert response["statusCode"] == 404
    assert body_of(response)["error"] == "OrderNotFound"


def test_cancelling_a_cancelled_order_again_returns_it_without_a_second_event(world: OrdersWorld) -> None:
    order_id = placed_order()
    cancel(order_id)

    again = cancel(order_id)

    assert again["statusCode"] == 200
    assert body_of(again)["status"] == "CANCELLED"
    assert len(world.outbox(order_id, "OrderCancelled")) == 1


def test_cancel_that_read_a_stale_order_rereads_and_never_overwrites(
    world: OrdersWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The conditional transition is what protects the order: the cancel read CREATED v1, inventory
    then reserved it (v2); the write must fail, and the cancel decide again from RESERVED v2."""
    from orders.store import OrderStore

    order_id = placed_order()
    stale = OrderStore.get_order
    snapshot = {"order": None}

    def first_read_is_stale(self: OrderStore, wanted: str) -> Any:
        if snapshot["order"] is None:
            snapshot["order"] = stale(self, wanted)
            deliver(world, INVENTORY, *world.outbox(order_id, "OrderCreated"))  # moves on to RESERVED v2
            return snapshot["order"]
        return stale(self, wanted)

    monkeypatch.setattr(OrderStore, "get_order", first_read_is_stale)

    response = cancel(order_id)

    assert response["statusCode"] == 200
    item = world.order(order_id)
    assert item is not None
    assert [s for s, _ in world.history(order_id)] == ["CREATED", "RESERVED", "CANCELLED"]
    assert item["version"] == 3
    (cancelled,) = world.outbox(order_id, "OrderCancelled")
    assert cancelled.payload is not None and cancelled.payload["previousStatus"] == "RESERVED"


def test_checked_in_openapi_document_is_current() -> None:
    from orders.handlers.api import openapi_document

    assert OPENAPI.exists(), "functions/orders/openapi.json is missing; generate it (see orders.handlers.api)"
    assert OPENAPI.read_text() == openapi_document(), (
        "functions/orders/openapi.json is stale: regenerate it with "
        "PYTHONPATH=layers/relay/python:functions python -m orders.handlers.api "
        "> functions/orders/openapi.json"
    )
