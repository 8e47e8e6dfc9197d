"""Fixtures of the orders handler tests: moto for AWS, the webhook and shipping API fakes on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws

from local.fakes.shipping_api import ShippingApiFake
from local.fakes.webhook import WebhookFake
from tests.handlers.orders.world import OrdersWorld, create_world

STOCK = {"SKU-MUG": 10, "SKU-TEAPOT": 5, "SKU-LAST": 1}


@pytest.fixture
def webhook() -> Iterator[WebhookFake]:
    with WebhookFake() as fake:
        yield fake


@pytest.fixture
def shipping() -> Iterator[ShippingApiFake]:
    with ShippingApiFake() as fake:
        yield fake


@pytest.fixture
def world(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    webhook: WebhookFake,
    shipping: ShippingApiFake,
) -> Iterator[OrdersWorld]:
    """moto with the orders stack's resources and stock, its functions' environment from the template
    (the webhook fake's URL and the test knobs on top), and a fresh runtime."""
    from relay.wiring import reset_all

    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    overrides = {
        "NOTIFY_WEBHOOK_URL": f"{webhook.base_url}/orders",
        "SHIPPING_API_URL": shipping.base_url,
        "HTTP_TIMEOUT_SECONDS": "2",
        # Keep the back-off of a transient failure short (it is best effort on moto anyway).
        "RELAY_BACKOFF_BASE_SECONDS": "0",
    }
    # moto drops SNS deliveries to Firehose; the emulator's patch delivers them, as AWS does, so the
    # order topic's analytics stream writes into the bucket here too.
    from emulator.patches import firehose_delivery

    remove_firehose = firehose_delivery.install()
    request.addfinalizer(remove_firehose)
    with mock_aws():
        created = create_world(overrides)
        created.seed(STOCK)
        for name, value in created.env().items():
            monkeypatch.setenv(name, value)
        reset_all()
        yield created
    reset_all()
