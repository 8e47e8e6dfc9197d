"""The invoice API fake: real HTTP on 127.0.0.1, issues at most one invoice per Idempotency-Key."""

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from local.fakes import InvoiceApiFake, InvoiceKnobs

TIMEOUT = 5.0


def invoice_request(operation_id: str = "op-1", **overrides: Any) -> dict[str, Any]:
    return {
        "operationId": operation_id,
        "paymentRef": f"PAY-{operation_id}",
        "amount": "25.00",
        "currency": "EUR",
        "payer": "acct-alice",
        "payee": "acct-shop",
        "lines": [{"description": "order 17", "amount": "25.00"}],
        **overrides,
    }


def post_invoice(
    fake: InvoiceApiFake, body: dict[str, Any], key: str | None = None, timeout: float = TIMEOUT
) -> requests.Response:
    headers = {} if key is None else {"Idempotency-Key": key}
    return requests.post(f"{fake.base_url}/invoices", json=body, headers=headers, timeout=timeout)


@pytest.fixture
def fake() -> Iterator[InvoiceApiFake]:
    with InvoiceApiFake() as running:
        yield running


def test_first_post_issues_an_invoice_201_and_repeats_return_it_200_counted_once(
    fake: InvoiceApiFake,
) -> None:
    first = post_invoice(fake, invoice_request("op-1"), key="op-1:invoice")
    repeats = [post_invoice(fake, invoice_request("op-1"), key="op-1:invoice") for _ in range(3)]

    assert first.status_code == 201
    assert [r.status_code for r in repeats] == [200, 200, 200]
    assert {r.json()["invoiceId"] for r in repeats} == {first.json()["invoiceId"]}
    assert fake.invoices() == {"op-1:invoice": 1}
    assert requests.get(f"{fake.base_url}/_admin/invoices", timeout=TIMEOUT).json() == {"op-1:invoice": 1}


def test_each_key_gets_its_own_invoice(fake: InvoiceApiFake) -> None:
    one = post_invoice(fake, invoice_request("op-1"), key="op-1:invoice")
    two = post_invoice(fake, invoice_request("op-2"), key="op-2:invoice")

    assert one.json()["invoiceId"] != two.json()["invoiceId"]
    assert fake.invoices() == {"op-1:invoice": 1, "op-2:invoice": 1}
    assert fake.invoices_by_operation() == {"op-1": 1, "op-2": 1}


def test_same_key_with_a_different_body_is_422_and_issues_nothing_more(fake: InvoiceApiFake) -> None:
    post_invoice(fake, invoice_request("op-1"), key="op-1:invoice")

    reused = post_invoice(fake, invoice_request("op-1", amount="30.00"), key="op-1:invoice")

    assert reused.status_code == 422
    assert reused.json()["error"] == "IdempotencyKeyReused"
    assert fake.invoices() == {"op-1:invoice": 1}


def test_missing_idempotency_key_is_400_and_issues_nothing(fake: InvoiceApiFake) -> None:
    response = post_invoice(fake, invoice_request("op-1"), key=None)

    assert response.status_code == 400
    assert fake.invoices() == {}


def test_an_issued_invoice_can_be_read_back_and_an_unknown_one_is_404(fake: InvoiceApiFake) -> None:
    invoice_id = post_invoice(fake, invoice_request("op-1"), key="op-1:invoice").json()["invoiceId"]

    found = requests.get(f"{fake.base_url}/invoices/{invoice_id}", timeout=TIMEOUT)
    missing = requests.get(f"{fake.base_url}/invoices/INV-nope", timeout=TIMEOUT)

    assert found.json()["operationId"] == "op-1"
    assert missing.status_code == 404


def test_outage_5xx_and_429_issue_nothing_and_a_later_call_issues_once(fake: InvoiceApiFake) -> None:
    statuses = []
    for knobs in (
        {"outage": True},
        {"outage": False, "fail_rate_5xx": 1.0},
        {"fail_rate_5xx": 0, "fail_rate_429": 1},
    ):
        requests.post(f"{fake.base_url}/_admin/knobs", json=knobs, timeout=TIMEOUT)
        statuses.append(post_invoice(fake, invoice_request("op-1"), key="op-1:invoice").status_code)
    assert fake.invoices() == {}
    fake.set_knobs(fail_rate_429=0)

    assert statuses == [503, 503, 429]
    assert post_invoice(fake, invoice_request("op-1"), key="op-1:invoice").status_code == 201
    assert fake.invoices() == {"op-1:invoice": 1}


def test_fail_after_commit_issues_once_and_the_retry_returns_the_same_invoice(fake: InvoiceApiFake) -> None:
    fake.set_knobs(fail_after_commit_rate=1.0)
    lost = post_invoice(fake, invoice_request("op-1"), key="op-1:invoice")
    fake.set_knobs(fail_after_commit_rate=0.0)
    retry = post_invoice(fake, invoice_request("op-1"), key="op-1:invoice")

    assert lost.status_code == 500
    assert retry.status_code == 200
    assert retry.json()["invoiceId"] == "INV-000001"
    assert fake.invoices() == {"op-1:invoice": 1}


def test_timeout_knob_trips_the_client_timeout_and_issues_nothing() -> None:
    with InvoiceApiFake(InvoiceKnobs(timeout_rate=1.0, timeout_sleep_s=2.0)) as fake:
        with pytest.raises(requests.Timeout):
            post_invoice(fake, invoice_request("op-1"), key="op-1:invoice", timeout=0.2)

        assert fake.invoices() == {}


# -- business refusals (refuse_payers, refuse_amount_over) ----------------------------------------------


def assert_refused(response: requests.Response, key: str, reason: str) -> None:
    assert response.status_code == 422
    body = response.json()
    assert (body["error"], body["idempotencyKey"]) == ("InvoiceRefused", key)
    assert reason in body["reason"]


def test_a_refused_payer_is_422_invoice_refused_and_nothing_is_issued_or_counted() -> None:
    with InvoiceApiFake(InvoiceKnobs(refuse_payers=frozenset({"acct-mallory"}))) as fake:
        refused = post_invoice(fake, invoice_request("op-1", payer="acct-mallory"), key="op-1:invoice")
        issued = post_invoice(fake, invoice_request("op-2"), key="op-2:invoice")

        assert_refused(refused, "op-1:invoice", "payer acct-mallory")
        assert issued.status_code == 201 and issued.json()["invoiceId"] == "INV-000001"
        assert fake.invoices() == {"op-2:invoice": 1}
        assert fake.invoices_by_operation() == {"op-2": 1}
        assert fake.refusals() == {"op-1:invoice": "payer acct-mallory may not be invoiced"}


def test_an_amount_over_the_limit_is_refused_and_one_at_the_limit_is_issued(fake: InvoiceApiFake) -> None:
    fake.set_knobs(refuse_amount_over="100.00")  # as POST /_admin/knobs and FAKE_REFUSE_AMOUNT_OVER give it

    over = post_invoice(fake, invoice_request("op-1", amount="100.01"), key="op-1:invoice")
    at_limit = post_invoice(fake, invoice_request("op-2", amount="100.00"), key="op-2:invoice")

    assert_refused(over, "op-1:invoice", "amount 100.01 exceeds the limit 100.00")
    assert at_limit.status_code == 201
    assert fake.invoices() == {"op-2:invoice": 1}


def test_a_refusal_is_final_for_its_key_even_after_the_knob_is_lifted(fake: InvoiceApiFake) -> None:
    fake.set_knobs(refuse_payers="acct-alice")
    first = post_invoice(fake, invoice_request("op-1"), key="op-1:invoice")
    fake.set_knobs(refuse_payers="")

    repeats = [post_invoice(fake, invoice_request("op-1"), key="op-1:invoice") for _ in range(2)]
    new_key = post_invoice(fake, invoice_request("op-1"), key="op-1:invoice-2")

    assert [r.json() for r in repeats] == [first.json(), first.json()]
    assert_refused(repeats[0], "op-1:invoice", "payer acct-alice")
    assert new_key.status_code == 201  # the knob is off: a new key is decided afresh
    assert fake.invoices() == {"op-1:invoice-2": 1}


def test_a_refused_key_sent_with_another_body_is_idempotency_key_reused_and_issues_nothing(
    fake: InvoiceApiFake,
) -> None:
    fake.set_knobs(refuse_amount_over="10")
    post_invoice(fake, invoice_request("op-1"), key="op-1:invoice")

    reused = post_invoice(fake, invoice_request("op-1", amount="5.00"), key="op-1:invoice")

    assert reused.status_code == 422 and reused.json()["error"] == "IdempotencyKeyReused"
    assert fake.invoices() == {}


def test_refusals_are_served_at_admin_refusals_and_forgotten_on_reset(fake: InvoiceApiFake) -> None:
    knobs = {"refuse_payers": ["acct-alice", "acct-bob"], "refuse_amount_over": "1000"}
    answered = requests.post(f"{fake.base_url}/_admin/knobs", json=knobs, timeout=TIMEOUT).json()
    assert (answered["refuse_payers"], answered["refuse_amount_over"]) == (["acct-alice", "acct-bob"], "1000")
    post_invoice(fake, invoice_request("op-1", payer="acct-bob"), key="op-1:invoice")

    view = requests.get(f"{fake.base_url}/_admin/refusals", timeout=TIMEOUT).json()
    assert view == {"op-1:invoice": "payer acct-bob may not be invoiced"}
    requests.post(f"{fake.base_url}/_admin/reset", timeout=TIMEOUT)
    assert fake.refusals() == {}
    assert fake.knobs.refuse_payers == frozenset()


def test_a_refusal_whose_reply_is_lost_is_refused_again_on_the_retry(fake: InvoiceApiFake) -> None:
    fake.set_knobs(refuse_payers="acct-alice", fail_after_commit_rate=1.0)
    lost = post_invoice(fake, invoice_request("op-1"), key="op-1:invoice")
    fake.set_knobs(fail_after_commit_rate=0.0, refuse_payers="")

    retry = post_invoice(fake, invoice_request("op-1"), key="op-1:invoice")

    assert lost.status_code == 500
    assert_refused(retry, "op-1:invoice", "payer acct-alice")
    assert fake.invoices() == {}
