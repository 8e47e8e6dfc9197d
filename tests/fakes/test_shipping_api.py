"""The shipping API fake: real HTTP on 127.0.0.1, creates at most one shipment per Idempotency-Key."""

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from local.fakes import ShippingApiFake, ShippingKnobs
from local.fakes.__main__ import build_fake, parse_args

TIMEOUT = 5.0


def shipment_request(order_id: str = "ord-1", **overrides: Any) -> dict[str, Any]:
    return {
        "orderId": order_id,
        "customerId": "cust-alice",
        "items": [{"sku": "SKU-RED-MUG", "quantity": 2}, {"sku": "SKU-TEA", "quantity": 1}],
        **overrides,
    }


def post_shipment(
    fake: ShippingApiFake, body: Any, key: str | None = None, timeout: float = TIMEOUT
) -> requests.Response:
    headers = {} if key is None else {"Idempotency-Key": key}
    return requests.post(f"{fake.base_url}/shipments", json=body, headers=headers, timeout=timeout)


def admin(fake: ShippingApiFake, view: str) -> Any:
    response = requests.get(f"{fake.base_url}/_admin/{view}", timeout=TIMEOUT)
    assert response.status_code == 200
    return response.json()


@pytest.fixture
def fake() -> Iterator[ShippingApiFake]:
    with ShippingApiFake() as running:
        yield running


def test_first_post_creates_a_shipment_201_and_repeats_return_it_200_counted_once(
    fake: ShippingApiFake,
) -> None:
    first = post_shipment(fake, shipment_request("ord-1"), key="ord-1:shipment")
    repeats = [post_shipment(fake, shipment_request("ord-1"), key="ord-1:shipment") for _ in range(3)]

    assert first.status_code == 201
    assert first.json() == {
        "shipmentId": "SHP-000001",
        "idempotencyKey": "ord-1:shipment",
        "orderId": "ord-1",
        "status": "REQUESTED",
        "items": [{"sku": "SKU-RED-MUG", "quantity": 2}, {"sku": "SKU-TEA", "quantity": 1}],
    }
    assert first.headers["Location"] == "/shipments/SHP-000001"
    assert [r.status_code for r in repeats] == [200, 200, 200]
    assert [r.json() for r in repeats] == [first.json()] * 3
    assert fake.shipments() == {"ord-1:shipment": 1}
    assert fake.shipments_by_order() == {"ord-1": 1}


def test_each_key_gets_its_own_shipment(fake: ShippingApiFake) -> None:
    one = post_shipment(fake, shipment_request("ord-1"), key="ord-1:shipment")
    two = post_shipment(fake, shipment_request("ord-2"), key="ord-2:shipment")

    assert (one.status_code, two.status_code) == (201, 201)
    assert one.json()["shipmentId"] != two.json()["shipmentId"]
    assert fake.shipments() == {"ord-1:shipment": 1, "ord-2:shipment": 1}
    assert fake.shipments_by_order() == {"ord-1": 1, "ord-2": 1}


def test_a_caller_that_uses_a_new_key_on_retry_shows_up_in_shipments_by_order(fake: ShippingApiFake) -> None:
    first = post_shipment(fake, shipment_request("ord-1"), key="ord-1:shipment")
    again = post_shipment(fake, shipment_request("ord-1"), key="ord-1:shipment-retry")

    assert again.status_code == 201
    assert fake.shipments() == {"ord-1:shipment": 1, "ord-1:shipment-retry": 1}
    assert fake.shipments_by_order() == {"ord-1": 2}
    assert admin(fake, "shipments-by-order") == {"ord-1": 2}
    assert again.json()["shipmentId"] != first.json()["shipmentId"]
    assert fake.shipment_for("ord-1") == first.json()  # the first one created for the order


def test_same_key_with_a_different_body_is_422_and_changes_nothing(fake: ShippingApiFake) -> None:
    created = post_shipment(fake, shipment_request("ord-1"), key="ord-1:shipment").json()

    reused = post_shipment(
        fake, shipment_request("ord-1", items=[{"sku": "SKU-RED-MUG", "quantity": 5}]), key="ord-1:shipment"
    )

    assert reused.status_code == 422
    assert (reused.json()["error"], reused.json()["idempotencyKey"]) == (
        "IdempotencyKeyReused",
        "ord-1:shipment",
    )
    assert fake.shipments() == {"ord-1:shipment": 1}
    assert fake.shipment_for("ord-1") == created
    read_back = requests.get(f"{fake.base_url}/shipments/{created['shipmentId']}", timeout=TIMEOUT)
    assert read_back.json() == created


def test_missing_idempotency_key_is_400_and_creates_nothing(fake: ShippingApiFake) -> None:
    response = post_shipment(fake, shipment_request("ord-1"), key=None)
    blank = post_shipment(fake, shipment_request("ord-1"), key="")

    assert (response.status_code, response.json()["error"]) == (400, "IdempotencyKeyMissing")
    assert (blank.status_code, blank.json()["error"]) == (400, "IdempotencyKeyMissing")
    assert fake.shipments() == {}


def test_a_body_that_is_not_json_is_400_and_creates_nothing(fake: ShippingApiFake) -> None:
    response = requests.post(
        f"{fake.base_url}/shipments",
        data=b"{not json",
        headers={"Idempotency-Key": "ord-1:shipment", "Content-Type": "application/json"},
        timeout=TIMEOUT,
    )

    assert (response.status_code, response.json()["error"]) == (400, "InvalidJson")
    assert fake.shipments() == {}


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ([], {"body"}),
        ({}, {"orderId", "customerId", "items"}),
        (shipment_request("", customerId="  "), {"orderId", "customerId"}),
        (shipment_request("ord-1", items=[]), {"items"}),
        (shipment_request("ord-1", items={"sku": "SKU-TEA", "quantity": 1}), {"items"}),
        (shipment_request("ord-1", items=["SKU-TEA"]), {"items[0]"}),
        (
            shipment_request(
                "ord-1",
                items=[
                    {"sku": "SKU-TEA", "quantity": 1},
                    {"quantity": 0},
                    {"sku": "SKU-MUG", "quantity": True},
                    {"sku": "", "quantity": 1.5},
                    {"sku": "SKU-POT", "quantity": "2"},
                ],
            ),
            {
                "items[1].sku",
                "items[1].quantity",
                "items[2].quantity",
                "items[3].sku",
                "items[3].quantity",
                "items[4].quantity",
            },
        ),
    ],
)
def test_field_errors_are_400_validation_error_naming_the_fields(
    fake: ShippingApiFake, body: Any, fields: set[str]
) -> None:
    response = post_shipment(fake, body, key="ord-1:shipment")

    assert response.status_code == 400
    assert response.json()["error"] == "ValidationError"
    assert set(response.json()["fields"]) == fields
    assert fake.shipments() == {}
    # The key was not used up by the invalid request: a valid one with it is created.
    assert post_shipment(fake, shipment_request("ord-1"), key="ord-1:shipment").status_code == 201


def test_a_created_shipment_can_be_read_back_and_an_unknown_one_is_404(fake: ShippingApiFake) -> None:
    created = post_shipment(fake, shipment_request("ord-1"), key="ord-1:shipment").json()

    found = requests.get(f"{fake.base_url}/shipments/{created['shipmentId']}", timeout=TIMEOUT)
    missing = requests.get(f"{fake.base_url}/shipments/SHP-999999", timeout=TIMEOUT)

    assert found.status_code == 200
    assert found.json() == created
    assert (missing.status_code, missing.json()["error"]) == (404, "ShipmentNotFound")
    assert fake.shipment_for("ord-1") == created
    assert fake.shipment_for("ord-2") is None


def test_outage_is_503_creates_nothing_and_a_later_call_creates_once(fake: ShippingApiFake) -> None:
    requests.post(f"{fake.base_url}/_admin/knobs", json={"outage": True}, timeout=TIMEOUT)
    during = [post_shipment(fake, shipment_request("ord-1"), key="ord-1:shipment") for _ in range(2)]
    read_during = requests.get(f"{fake.base_url}/shipments/SHP-000001", timeout=TIMEOUT)

    assert [r.status_code for r in during] == [503, 503]
    assert during[0].json()["error"] == "ServiceUnavailable"
    assert read_during.status_code == 503
    assert fake.shipments() == {}
    assert [call["fault"] for call in admin(fake, "calls")["calls"]] == ["outage"] * 3

    fake.set_knobs(outage=False)
    after = post_shipment(fake, shipment_request("ord-1"), key="ord-1:shipment")

    assert after.status_code == 201
    assert fake.shipments() == {"ord-1:shipment": 1}


def test_5xx_and_429_knobs_create_nothing(fake: ShippingApiFake) -> None:
    fake.set_knobs(fail_rate_5xx=1.0)
    failed = post_shipment(fake, shipment_request("ord-1"), key="ord-1:shipment")
    fake.set_knobs(fail_rate_5xx=0.0, fail_rate_429=1.0, retry_after_s=7)
    throttled = post_shipment(fake, shipment_request("ord-1"), key="ord-1:shipment")

    assert failed.status_code == 503
    assert (throttled.status_code, throttled.headers["Retry-After"]) == (429, "7")
    assert fake.shipments() == {}


def test_fail_after_commit_creates_once_and_the_retry_returns_the_same_shipment(
    fake: ShippingApiFake,
) -> None:
    fake.set_knobs(fail_after_commit_rate=1.0)
    lost = post_shipment(fake, shipment_request("ord-1"), key="ord-1:shipment")
    fake.set_knobs(fail_after_commit_rate=0.0)
    retry = post_shipment(fake, shipment_request("ord-1"), key="ord-1:shipment")

    assert lost.status_code == 500
    assert retry.status_code == 200
    assert retry.json()["shipmentId"] == "SHP-000001"
    assert fake.shipments() == {"ord-1:shipment": 1}


def test_timeout_knob_trips_the_client_timeout_and_creates_nothing() -> None:
    with ShippingApiFake(ShippingKnobs(timeout_rate=1.0, timeout_sleep_s=2.0)) as fake:
        with pytest.raises(requests.Timeout):
            post_shipment(fake, shipment_request("ord-1"), key="ord-1:shipment", timeout=0.2)

        assert fake.shipments() == {}


# -- business refusals (refuse_customers) ---------------------------------------------------------------


def assert_refused(response: requests.Response, key: str, customer: str) -> None:
    assert response.status_code == 422
    body = response.json()
    assert (body["error"], body["idempotencyKey"]) == ("ShipmentRefused", key)
    assert body["reason"] == f"customer {customer} may not be shipped to"


def test_a_refused_customer_is_422_shipment_refused_and_nothing_is_created_or_counted() -> None:
    with ShippingApiFake(ShippingKnobs(refuse_customers=frozenset({"cust-mallory"}))) as fake:
        refused = post_shipment(
            fake, shipment_request("ord-1", customerId="cust-mallory"), key="ord-1:shipment"
        )
        created = post_shipment(fake, shipment_request("ord-2"), key="ord-2:shipment")

        assert_refused(refused, "ord-1:shipment", "cust-mallory")
        assert created.status_code == 201 and created.json()["shipmentId"] == "SHP-000001"
        assert fake.shipments() == {"ord-2:shipment": 1}
        assert fake.shipments_by_order() == {"ord-2": 1}
        assert fake.shipment_for("ord-1") is None
        assert fake.refusals() == {"ord-1:shipment": "customer cust-mallory may not be shipped to"}


def test_a_refusal_is_final_for_its_key_even_after_the_knob_is_lifted(fake: ShippingApiFake) -> None:
    fake.set_knobs(refuse_customers="cust-alice")
    first = post_shipment(fake, shipment_request("ord-1"), key="ord-1:shipment")
    fake.set_knobs(refuse_customers="")

    repeats = [post_shipment(fake, shipment_request("ord-1"), key="ord-1:shipment") for _ in range(2)]
    new_key = post_shipment(fake, shipment_request("ord-1"), key="ord-1:shipment-2")

    assert_refused(first, "ord-1:shipment", "cust-alice")
    assert [r.json() for r in repeats] == [first.json(), first.json()]
    assert_refused(repeats[0], "ord-1:shipment", "cust-alice")
    assert new_key.status_code == 201  # the knob is off: a new key is decided afresh
    assert fake.shipments() == {"ord-1:shipment-2": 1}
    assert fake.refusals() == {"ord-1:shipment": "customer cust-alice may not be shipped to"}


def test_a_refused_key_sent_with_another_body_is_idempotency_key_reused_and_creates_nothing(
    fake: ShippingApiFake,
) -> None:
    fake.set_knobs(refuse_customers="cust-alice")
    post_shipment(fake, shipment_request("ord-1"), key="ord-1:shipment")
    fake.set_knobs(refuse_customers="")

    reused = post_shipment(fake, shipment_request("ord-1", customerId="cust-bob"), key="ord-1:shipment")

    assert reused.status_code == 422 and reused.json()["error"] == "IdempotencyKeyReused"
    assert fake.shipments() == {}


def test_a_refusal_whose_reply_is_lost_is_refused_again_on_the_retry(fake: ShippingApiFake) -> None:
    fake.set_knobs(refuse_customers="cust-alice", fail_after_commit_rate=1.0)
    lost = post_shipment(fake, shipment_request("ord-1"), key="ord-1:shipment")
    fake.set_knobs(fail_after_commit_rate=0.0, refuse_customers="")

    retry = post_shipment(fake, shipment_request("ord-1"), key="ord-1:shipment")

    assert lost.status_code == 500
    assert_refused(retry, "ord-1:shipment", "cust-alice")
    assert fake.shipments() == {}


# -- admin views, knobs, reset, CLI ---------------------------------------------------------------------


def test_admin_views_serve_shipments_by_key_by_order_and_refusals(fake: ShippingApiFake) -> None:
    answered = requests.post(
        f"{fake.base_url}/_admin/knobs", json={"refuse_customers": ["cust-bob", "cust-eve"]}, timeout=TIMEOUT
    ).json()
    post_shipment(fake, shipment_request("ord-1"), key="ord-1:shipment")
    post_shipment(fake, shipment_request("ord-1"), key="ord-1:shipment")
    post_shipment(fake, shipment_request("ord-2"), key="ord-2:shipment")
    post_shipment(fake, shipment_request("ord-3", customerId="cust-bob"), key="ord-3:shipment")

    assert answered["refuse_customers"] == ["cust-bob", "cust-eve"]
    assert admin(fake, "knobs")["refuse_customers"] == ["cust-bob", "cust-eve"]
    assert admin(fake, "shipments") == {"ord-1:shipment": 1, "ord-2:shipment": 1}
    assert admin(fake, "shipments-by-order") == {"ord-1": 1, "ord-2": 1}
    assert admin(fake, "refusals") == {"ord-3:shipment": "customer cust-bob may not be shipped to"}
    calls = admin(fake, "calls")["calls"]
    assert [(c["method"], c["path"], c["key"], c["status"]) for c in calls] == [
        ("POST", "/shipments", "ord-1:shipment", 201),
        ("POST", "/shipments", "ord-1:shipment", 200),
        ("POST", "/shipments", "ord-2:shipment", 201),
        ("POST", "/shipments", "ord-3:shipment", 422),
    ]


def test_reset_forgets_shipments_refusals_calls_and_knobs(fake: ShippingApiFake) -> None:
    fake.set_knobs(refuse_customers="cust-bob")
    created = post_shipment(fake, shipment_request("ord-1"), key="ord-1:shipment").json()
    post_shipment(fake, shipment_request("ord-2", customerId="cust-bob"), key="ord-2:shipment")

    reset = requests.post(f"{fake.base_url}/_admin/reset", timeout=TIMEOUT)

    assert reset.status_code == 200
    assert (fake.shipments(), fake.shipments_by_order(), fake.refusals()) == ({}, {}, {})
    assert fake.shipment_for("ord-1") is None
    assert fake.knobs == ShippingKnobs()
    assert admin(fake, "calls") == {"calls": []}
    old = requests.get(f"{fake.base_url}/shipments/{created['shipmentId']}", timeout=TIMEOUT)
    assert old.status_code == 404
    # Forgotten, not refused: the keys are decided afresh, and ids are never handed out twice.
    again = post_shipment(fake, shipment_request("ord-2", customerId="cust-bob"), key="ord-2:shipment")
    assert again.status_code == 201
    assert again.json()["shipmentId"] != created["shipmentId"]


def test_cli_builds_the_shipping_fake_with_knobs_from_env_and_cli() -> None:
    environ = {"FAKE_REFUSE_CUSTOMERS": "cust-a, cust-b", "FAKE_OUTAGE": "true"}
    args = parse_args(["shipping-api", "--port", "0", "--knob", "outage=false", "--knob", "seed=3"])

    fake = build_fake(args, environ)

    assert isinstance(fake, ShippingApiFake)
    assert fake.knobs == ShippingKnobs(refuse_customers=frozenset({"cust-a", "cust-b"}), outage=False, seed=3)
    assert parse_args(["shipping-api"]).port is None
    with fake:
        assert fake.base_url.startswith("http://127.0.0.1:")
