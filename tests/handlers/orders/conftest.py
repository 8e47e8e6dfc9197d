"""Fixtures of the orders handler tests: moto for AWS, the webhook fake on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws

from local.fakes.webhook import WebhookFake
from tests.handlers.orders.world import OrdersWorld, create_world

STOCK = {"SKU-MUG": 10, "SKU-TEAPOT": 5, "SKU-LAST": 1}


@pytest.fixture
def webhook() -> Iterator[WebhookFake]:
    with WebhookFake() as fake:
        yield fake


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch, webhook: WebhookFake) -> Iterator[OrdersWorld]:
    """moto with the orders resources and stock, the functions' environment, and a fresh runtime."""
    from orders.runtime import reset_runtime

    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    with mock_aws():
        created = create_world()
        created.seed(STOCK)
        for name, value in created.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("NOTIFY_WEBHOOK_URL", f"{webhook.base_url}/orders")
        monkeypatch.setenv("HTTP_TIMEOUT_SECONDS", "2")
        # Keep the back-off of a transient failure short (it is best effort on moto anyway).
        monkeypatch.setenv("RELAY_BACKOFF_BASE_SECONDS", "0")
        reset_runtime()
        yield created
    reset_runtime()
