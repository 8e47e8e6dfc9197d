"""Fixtures of the reports handler tests: moto for AWS, the report API and webhook fakes on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws

from local.fakes.report_api import ReportApiFake
from local.fakes.webhook import WebhookFake
from tests.handlers.reports.world import ReportsWorld, create_world


@pytest.fixture
def report_api() -> Iterator[ReportApiFake]:
    with ReportApiFake() as fake:
        yield fake


@pytest.fixture
def webhook() -> Iterator[WebhookFake]:
    with WebhookFake() as fake:
        yield fake


@pytest.fixture
def world(
    monkeypatch: pytest.MonkeyPatch, report_api: ReportApiFake, webhook: WebhookFake
) -> Iterator[ReportsWorld]:
    """moto with the reports stack's resources, its functions' environment from the template (the
    fakes' URLs and the test knobs on top), and a fresh runtime."""
    from relay.wiring import reset_all

    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    overrides = {
        "REPORT_API_URL": report_api.base_url,
        "NOTIFY_WEBHOOK_URL": f"{webhook.base_url}/report-ready",
        "HTTP_TIMEOUT_SECONDS": "2",
        # Keep the back-off of a transient failure short (it is best effort on moto anyway).
        "RELAY_BACKOFF_BASE_SECONDS": "1",
    }
    with mock_aws():
        created = create_world(overrides)
        for name, value in created.env().items():
            monkeypatch.setenv(name, value)
        reset_all()
        yield created
    reset_all()


def use_queue(monkeypatch: pytest.MonkeyPatch, world: ReportsWorld, queue: str) -> None:
    """Run as the function consuming ``queue``: its RELAY_QUEUE_URL / RELAY_DLQ_URL (and whatever else
    it sets differently from the other functions), from the template."""
    for name, value in world.consumer_env(queue).items():
        monkeypatch.setenv(name, value)
