"""Fixtures of the reports handler tests: moto for AWS, the report API and webhook fakes on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws

from local.fakes.report_api import ReportApiFake
from local.fakes.webhook import WebhookFake
from tests.handlers.reports.world import IDEMPOTENCY_TABLE, VERIFICATIONS_TABLE, ReportsWorld, create_world


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
    """moto with the reports resources, the functions' environment, and a fresh runtime."""
    from reports.runtime import reset_runtime

    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    with mock_aws():
        created = create_world()
        env = {
            "VERIFICATIONS_TABLE": VERIFICATIONS_TABLE,
            "IDEMPOTENCY_TABLE": IDEMPOTENCY_TABLE,
            "REPORT_API_URL": report_api.base_url,
            "NOTIFY_WEBHOOK_URL": f"{webhook.base_url}/report-ready",
            "VERIFY_MAX_AGE_SECONDS": "3600",
            "HTTP_TIMEOUT_SECONDS": "2",
            # Keep the back-off of a transient failure short (it is best effort on moto anyway).
            "RELAY_BACKOFF_BASE_SECONDS": "1",
        }
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        reset_runtime()
        yield created
    reset_runtime()


def use_queue(monkeypatch: pytest.MonkeyPatch, world: ReportsWorld, queue: str) -> None:
    """Point the kernel consumer at ``queue`` (RELAY_QUEUE_URL / RELAY_DLQ_URL, as the stack does)."""
    for name, value in world.consumer_env(queue).items():
        monkeypatch.setenv(name, value)
