"""Fixtures of the payments handler tests: moto for AWS, the fakes on 127.0.0.1 for the rest."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws

from local.fakes.invoice_api import InvoiceApiFake
from local.fakes.legacy_payments import LegacyPaymentKnobs, LegacyPaymentsFake
from tests.handlers.payments.pipeline import Infrastructure, create_infrastructure


@pytest.fixture
def legacy() -> Iterator[LegacyPaymentsFake]:
    fake = LegacyPaymentsFake(LegacyPaymentKnobs(timeout_sleep_s=3.0, seed=7))
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def invoice_api() -> Iterator[InvoiceApiFake]:
    fake = InvoiceApiFake()
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def infra(
    monkeypatch: pytest.MonkeyPatch, legacy: LegacyPaymentsFake, invoice_api: InvoiceApiFake
) -> Iterator[Infrastructure]:
    """moto with the payments stack's resources, its functions' environment from the template (the
    fakes' URLs and the test knobs on top), and a fresh runtime; the consumer variables are the
    payment worker's."""
    from relay.wiring import reset_all

    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    overrides = {
        "LEGACY_PAYMENTS_URL": legacy.base_url,
        "INVOICE_API_URL": invoice_api.base_url,
        "LEGACY_TIMEOUT_SECONDS": "1",
        # The callback receivers of these tests are local fakes (test_payments_notices.py).
        "CALLBACK_ALLOW_LOOPBACK_HTTP": "true",
    }
    with mock_aws():
        infrastructure = create_infrastructure(overrides)
        for name, value in infrastructure.env().items():
            monkeypatch.setenv(name, value)
        for name, value in infrastructure.consumer_env("payment-requests").items():
            monkeypatch.setenv(name, value)
        reset_all()
        yield infrastructure
    reset_all()


@pytest.fixture
def fast_retries(infra: Infrastructure, monkeypatch: pytest.MonkeyPatch) -> None:
    """Backoff and status-check delays of 0 s, so a delayed copy is receivable at once: the pump
    plays rounds, not wall-clock minutes."""
    from relay.wiring import reset_all

    monkeypatch.setenv("RELAY_BACKOFF_BASE_SECONDS", "0")
    monkeypatch.setenv("PAYMENT_CHECK_BASE_DELAY_SECONDS", "0")
    reset_all()


def use_queue(monkeypatch: pytest.MonkeyPatch, infra: Infrastructure, queue: str) -> None:
    """Run as the function consuming ``queue``: its RELAY_QUEUE_URL / RELAY_DLQ_URL (and whatever else
    it sets differently from the other functions), from the template."""
    for name, value in infra.consumer_env(queue).items():
        monkeypatch.setenv(name, value)
