"""The webhook fake: records every notification it gets, without deduplicating them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from local.fakes.webhook import WebhookFake

TIMEOUT = 5.0


@pytest.fixture
def fake() -> Iterator[WebhookFake]:
    with WebhookFake() as running:
        yield running


def post(fake: WebhookFake, body: dict[str, str], key: str | None = None) -> requests.Response:
    headers = {} if key is None else {"Idempotency-Key": key}
    return requests.post(f"{fake.base_url}/report-ready", json=body, headers=headers, timeout=TIMEOUT)


def test_every_post_is_recorded_with_its_body_and_headers(fake: WebhookFake) -> None:
    response = post(fake, {"reportId": "r-1"}, key="r-1:report-ready")

    assert response.status_code == 204
    (delivery,) = fake.deliveries()
    assert delivery["path"] == "/report-ready"
    assert delivery["body"] == {"reportId": "r-1"}
    assert delivery["headers"]["idempotency-key"] == "r-1:report-ready"
    assert delivery["key"] == "r-1:report-ready"


def test_repeats_are_counted_per_idempotency_key_not_merged(fake: WebhookFake) -> None:
    post(fake, {"reportId": "r-1"}, key="r-1:report-ready")
    post(fake, {"reportId": "r-1"}, key="r-1:report-ready")
    post(fake, {"reportId": "r-2"}, key="r-2:report-ready")
    post(fake, {"reportId": "r-3"})

    assert fake.deliveries_by_key() == {"r-1:report-ready": 2, "r-2:report-ready": 1, "-": 1}
    view = requests.get(f"{fake.base_url}/_admin/deliveries-by-key", timeout=TIMEOUT).json()
    assert view == fake.deliveries_by_key()


def test_a_faulted_post_is_a_call_but_not_a_delivery(fake: WebhookFake) -> None:
    fake.set_knobs(outage=True)

    assert post(fake, {"reportId": "r-1"}, key="k").status_code == 503
    assert fake.deliveries() == []
    assert [(c["status"], c["fault"]) for c in fake.calls()] == [(503, "outage")]


def test_a_lost_reply_is_still_a_delivery(fake: WebhookFake) -> None:
    fake.set_knobs(fail_after_commit_rate=1.0)

    assert post(fake, {"reportId": "r-1"}, key="k").status_code == 500
    assert fake.deliveries_by_key() == {"k": 1}


def test_get_is_405_and_reset_forgets_deliveries(fake: WebhookFake) -> None:
    post(fake, {"reportId": "r-1"}, key="k")

    assert requests.get(f"{fake.base_url}/report-ready", timeout=TIMEOUT).status_code == 405
    fake.reset()
    assert fake.deliveries() == []
