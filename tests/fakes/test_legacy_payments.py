"""The legacy payment system fake: real HTTP on 127.0.0.1, charges at most once per Idempotency-Key."""

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
import requests

from local.fakes import KnobError, LegacyPaymentKnobs, LegacyPaymentsFake, knobs_from_env
from local.fakes.__main__ import build_fake, parse_args

TIMEOUT = 5.0


def payment_request(operation_id: str = "op-1", **overrides: Any) -> dict[str, Any]:
    return {
        "operationId": operation_id,
        "paymentId": f"pay-{operation_id}",
        "amount": "25.00",
        "currency": "EUR",
        "payer": "acct-alice",
        "payee": "acct-shop",
        **overrides,
    }


def post_payment(
    fake: LegacyPaymentsFake, body: dict[str, Any], key: str | None = None, timeout: float = TIMEOUT
) -> requests.Response:
    headers = {} if key is None else {"Idempotency-Key": key}
    return requests.post(f"{fake.base_url}/payments", json=body, headers=headers, timeout=timeout)


def check_payment(fake: LegacyPaymentsFake, key: str) -> requests.Response:
    return requests.get(f"{fake.base_url}/payments/{key}", timeout=TIMEOUT)


@pytest.fixture
def fake() -> Iterator[LegacyPaymentsFake]:
    with LegacyPaymentsFake() as running:
        yield running


# idempotency ---------------------------------------------------------------------------------------


def test_first_post_charges_and_answers_completed_with_a_payment_ref(fake: LegacyPaymentsFake) -> None:
    response = post_payment(fake, payment_request("op-1"), key="op-1:payment")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "COMPLETED"
    assert body["idempotencyKey"] == "op-1:payment"
    assert body["paymentRef"]
    assert fake.charges() == {"op-1:payment": 1}


def test_repeated_posts_with_one_key_charge_once_and_return_the_same_payment_ref(
    fake: LegacyPaymentsFake,
) -> None:
    responses = [post_payment(fake, payment_request("op-1"), key="op-1:payment") for _ in range(5)]

    assert {r.status_code for r in responses} == {200}
    assert len({r.json()["paymentRef"] for r in responses}) == 1
    assert fake.charges() == {"op-1:payment": 1}
    assert requests.get(f"{fake.base_url}/_admin/charges", timeout=TIMEOUT).json() == {"op-1:payment": 1}


def test_same_key_with_a_different_body_is_422_and_charges_nothing_more(fake: LegacyPaymentsFake) -> None:
    first = post_payment(fake, payment_request("op-1"), key="op-1:payment")

    reused = post_payment(fake, payment_request("op-1", amount="99.00"), key="op-1:payment")

    assert reused.status_code == 422
    assert reused.json()["error"] == "IdempotencyKeyReused"
    assert "op-1:payment" in reused.json()["message"]
    assert fake.charges() == {"op-1:payment": 1}
    assert check_payment(fake, "op-1:payment").json()["paymentRef"] == first.json()["paymentRef"]


def test_missing_idempotency_key_is_400_and_charges_nothing(fake: LegacyPaymentsFake) -> None:
    response = post_payment(fake, payment_request("op-1"), key=None)

    assert response.status_code == 400
    assert response.json()["error"] == "IdempotencyKeyMissing"
    assert fake.charges() == {}


def test_invalid_body_is_400_with_field_errors_and_charges_nothing(fake: LegacyPaymentsFake) -> None:
    response = post_payment(fake, payment_request("op-1", amount="-3", payer=""), key="op-1:payment")

    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"amount", "payer"}
    assert fake.charges() == {}


def test_charges_by_operation_exposes_a_caller_that_mints_a_new_key_per_retry(
    fake: LegacyPaymentsFake,
) -> None:
    post_payment(fake, payment_request("op-1"), key="op-1:payment:attempt-1")
    post_payment(fake, payment_request("op-1"), key="op-1:payment:attempt-2")

    assert fake.charges_by_operation() == {"op-1": 2}


# accepted, then completed ---------------------------------------------------------------------------


def test_accept_then_complete_after_n_answers_202_and_the_nth_status_check_completes() -> None:
    with LegacyPaymentsFake(LegacyPaymentKnobs(accept_then_complete_after=3)) as fake:
        accepted = post_payment(fake, payment_request("op-1"), key="op-1:payment")
        checks = [check_payment(fake, "op-1:payment").json()["status"] for _ in range(4)]

        assert accepted.status_code == 202
        assert accepted.json()["status"] == "PROCESSING"
        assert checks == ["PROCESSING", "PROCESSING", "COMPLETED", "COMPLETED"]
        assert check_payment(fake, "op-1:payment").json()["paymentRef"] == accepted.json()["paymentRef"]
        assert fake.charges() == {"op-1:payment": 1}


def test_a_repeated_post_while_processing_is_a_status_check_not_a_second_charge() -> None:
    with LegacyPaymentsFake(LegacyPaymentKnobs(accept_then_complete_after=2)) as fake:
        statuses = [
            post_payment(fake, payment_request("op-1"), key="op-1:payment").status_code for _ in range(3)
        ]

        assert statuses == [202, 202, 200]
        assert fake.charges() == {"op-1:payment": 1}


def test_status_of_an_unknown_key_is_404(fake: LegacyPaymentsFake) -> None:
    response = check_payment(fake, "op-unknown:payment")

    assert response.status_code == 404
    assert response.json()["error"] == "PaymentNotFound"


# business rejection -------------------------------------------------------------------------------


def test_rejected_payer_is_a_recorded_422_rejection_without_a_charge() -> None:
    with LegacyPaymentsFake(LegacyPaymentKnobs(reject_payers=frozenset({"acct-blocked"}))) as fake:
        rejected = post_payment(fake, payment_request("op-1", payer="acct-blocked"), key="op-1:payment")
        replay = post_payment(fake, payment_request("op-1", payer="acct-blocked"), key="op-1:payment")
        accepted = post_payment(fake, payment_request("op-2"), key="op-2:payment")

        assert rejected.status_code == 422
        assert rejected.json()["status"] == "REJECTED"
        assert "acct-blocked" in rejected.json()["reason"]
        assert replay.status_code == 422
        assert replay.json()["reason"] == rejected.json()["reason"]
        assert check_payment(fake, "op-1:payment").json()["status"] == "REJECTED"
        assert accepted.status_code == 200
        assert fake.charges() == {"op-2:payment": 1}


def test_amount_over_the_limit_is_rejected_and_an_amount_at_the_limit_is_charged() -> None:
    with LegacyPaymentsFake(LegacyPaymentKnobs(reject_amount_over=Decimal("100"))) as fake:
        over = post_payment(fake, payment_request("op-1", amount="100.01"), key="op-1:payment")
        at_limit = post_payment(fake, payment_request("op-2", amount="100.00"), key="op-2:payment")

        assert over.status_code == 422
        assert over.json()["status"] == "REJECTED"
        assert at_limit.status_code == 200
        assert fake.charges() == {"op-2:payment": 1}


# faults -------------------------------------------------------------------------------------------


def statuses_with_seed(seed: int, calls: int) -> tuple[list[int], dict[str, int]]:
    knobs = LegacyPaymentKnobs(fail_rate_5xx=0.5, seed=seed)
    with LegacyPaymentsFake(knobs) as fake:
        statuses = [
            post_payment(fake, payment_request(f"op-{i}"), key=f"op-{i}:payment").status_code
            for i in range(calls)
        ]
        return statuses, fake.charges()


def test_5xx_rate_with_a_seed_fails_the_same_calls_and_failed_calls_charge_nothing() -> None:
    statuses, charges = statuses_with_seed(seed=42, calls=12)
    again, _ = statuses_with_seed(seed=42, calls=12)

    assert statuses == again
    assert set(statuses) == {200, 503}
    assert charges == {f"op-{i}:payment": 1 for i, status in enumerate(statuses) if status == 200}


def test_429_rate_answers_too_many_requests_with_retry_after_and_charges_nothing() -> None:
    with LegacyPaymentsFake(LegacyPaymentKnobs(fail_rate_429=1.0, retry_after_s=7, seed=1)) as fake:
        response = post_payment(fake, payment_request("op-1"), key="op-1:payment")

        assert response.status_code == 429
        assert response.headers["Retry-After"] == "7"
        assert fake.charges() == {}


def test_outage_toggled_at_run_time_fails_every_call_until_turned_off(fake: LegacyPaymentsFake) -> None:
    admin_knobs = f"{fake.base_url}/_admin/knobs"

    assert requests.post(admin_knobs, json={"outage": True}, timeout=TIMEOUT).status_code == 200
    during = [post_payment(fake, payment_request("op-1"), key="op-1:payment").status_code for _ in range(3)]
    assert fake.charges() == {}
    assert requests.post(admin_knobs, json={"outage": False}, timeout=TIMEOUT).status_code == 200
    after = post_payment(fake, payment_request("op-1"), key="op-1:payment")

    assert during == [503, 503, 503]
    assert after.status_code == 200
    assert fake.charges() == {"op-1:payment": 1}


def test_fail_after_commit_charges_once_and_the_retry_returns_completed_with_the_same_ref(
    fake: LegacyPaymentsFake,
) -> None:
    fake.set_knobs(fail_after_commit_rate=1.0)
    lost = post_payment(fake, payment_request("op-1"), key="op-1:payment")
    charged_before_retry = fake.charges()
    fake.set_knobs(fail_after_commit_rate=0.0)
    retry = post_payment(fake, payment_request("op-1"), key="op-1:payment")

    assert lost.status_code == 500
    assert charged_before_retry == {"op-1:payment": 1}
    assert retry.status_code == 200
    assert retry.json()["status"] == "COMPLETED"
    committed = fake.payment("op-1:payment")
    assert committed is not None
    assert retry.json()["paymentRef"] == committed["paymentRef"]
    assert fake.charges() == {"op-1:payment": 1}


def test_fail_after_commit_in_drop_mode_closes_the_connection_without_a_reply(
    fake: LegacyPaymentsFake,
) -> None:
    fake.set_knobs(fail_after_commit_rate=1.0, fail_after_commit_mode="drop")

    with pytest.raises(requests.ConnectionError):
        post_payment(fake, payment_request("op-1"), key="op-1:payment")

    assert fake.charges() == {"op-1:payment": 1}
    assert fake.calls()[-1]["status"] is None
    assert fake.calls()[-1]["fault"] == "fail_after_commit"


def test_timeout_knob_trips_the_client_timeout_and_charges_nothing() -> None:
    knobs = LegacyPaymentKnobs(timeout_rate=1.0, timeout_sleep_s=2.0)
    with LegacyPaymentsFake(knobs) as fake:
        with pytest.raises(requests.Timeout):
            post_payment(fake, payment_request("op-1"), key="op-1:payment", timeout=0.2)

        assert fake.charges() == {}


def test_latency_delays_every_call(fake: LegacyPaymentsFake) -> None:
    fake.set_knobs(latency_ms=150)

    response = post_payment(fake, payment_request("op-1"), key="op-1:payment")

    assert response.status_code == 200
    assert response.elapsed.total_seconds() >= 0.15


# admin --------------------------------------------------------------------------------------------


def test_every_business_call_is_recorded_with_its_key_and_the_status_returned(
    fake: LegacyPaymentsFake,
) -> None:
    fake.set_knobs(outage=True)
    post_payment(fake, payment_request("op-1"), key="op-1:payment")
    fake.set_knobs(outage=False)
    post_payment(fake, payment_request("op-1"), key="op-1:payment")
    check_payment(fake, "op-1:payment")

    calls = requests.get(f"{fake.base_url}/_admin/calls", timeout=TIMEOUT).json()["calls"]

    assert [(c["method"], c["path"], c["key"], c["status"], c["fault"]) for c in calls] == [
        ("POST", "/payments", "op-1:payment", 503, "outage"),
        ("POST", "/payments", "op-1:payment", 200, None),
        ("GET", "/payments/op-1:payment", "op-1:payment", 200, None),
    ]
    assert all(c["at"] for c in calls)
    assert fake.calls() == calls


def test_reset_forgets_charges_calls_and_run_time_knobs() -> None:
    with LegacyPaymentsFake(LegacyPaymentKnobs(latency_ms=1)) as fake:
        fake.set_knobs(latency_ms=5, outage=True)
        post_payment(fake, payment_request("op-1"), key="op-1:payment")
        fake.set_knobs(outage=False)
        post_payment(fake, payment_request("op-1"), key="op-1:payment")

        assert requests.post(f"{fake.base_url}/_admin/reset", timeout=TIMEOUT).status_code == 200

        assert fake.charges() == {}
        assert fake.calls() == []
        assert fake.knobs == LegacyPaymentKnobs(latency_ms=1)
        assert check_payment(fake, "op-1:payment").status_code == 404


def test_an_unknown_or_invalid_knob_is_400_and_changes_nothing(fake: LegacyPaymentsFake) -> None:
    unknown = requests.post(f"{fake.base_url}/_admin/knobs", json={"fail_rate": 0.5}, timeout=TIMEOUT)
    invalid = requests.post(f"{fake.base_url}/_admin/knobs", json={"fail_rate_5xx": 2}, timeout=TIMEOUT)

    assert unknown.status_code == 400
    assert "fail_rate_5xx" in unknown.json()["message"]
    assert invalid.status_code == 400
    assert fake.knobs == LegacyPaymentKnobs()


def test_knobs_come_from_fake_env_vars_and_cli_knobs_win() -> None:
    environ = {"FAKE_FAIL_RATE_5XX": "0.2", "FAKE_REJECT_PAYERS": "acct-a, acct-b", "FAKE_OUTAGE": "true"}
    args = parse_args(["legacy-payments", "--port", "0", "--knob", "outage=false", "--knob", "seed=3"])

    fake = build_fake(args, environ)

    assert knobs_from_env(LegacyPaymentKnobs, environ) == {
        "fail_rate_5xx": "0.2",
        "reject_payers": "acct-a, acct-b",
        "outage": "true",
    }
    assert fake.knobs == LegacyPaymentKnobs(
        fail_rate_5xx=0.2, reject_payers=frozenset({"acct-a", "acct-b"}), outage=False, seed=3
    )
    with pytest.raises(KnobError, match="not a valid"):
        LegacyPaymentKnobs().replace(accept_then_complete_after="soon")
