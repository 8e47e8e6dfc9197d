"""The notifier: subscribers hear "report ready" once per report, whatever SQS redelivers."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from local.fakes.webhook import WebhookFake
from tests.handlers.reports.conftest import use_queue
from tests.handlers.reports.world import (
    NOTIFY_QUEUE,
    ReportsWorld,
    deliver,
    failed_ids,
    redeliver,
    report_generated,
)

SHA = hashlib.sha256(b"report").hexdigest()
KEY = "r-1:report-ready"


@pytest.fixture(autouse=True)
def _notification_queue(monkeypatch: pytest.MonkeyPatch, world: ReportsWorld) -> None:
    use_queue(monkeypatch, world, NOTIFY_QUEUE)


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retry delays of 0 s, so a delayed copy is receivable at once."""
    from relay.wiring import reset_all

    monkeypatch.setenv("RELAY_BACKOFF_BASE_SECONDS", "0")
    reset_all()


def notify(env: Any, *, receive_count: int = 1) -> dict[str, Any]:
    from reports.handlers import notifier

    return deliver(notifier.handler, env, queue=NOTIFY_QUEUE, receive_count=receive_count)


def notify_again(world: ReportsWorld, message: dict[str, Any]) -> dict[str, Any]:
    """Deliver a message received from the notification queue (a retry copy), as Lambda would."""
    from reports.handlers import notifier

    return redeliver(notifier.handler, world, NOTIFY_QUEUE, message)


def parked_reasons(world: ReportsWorld) -> list[str]:
    return [m["MessageAttributes"]["relay.errorClass"]["StringValue"] for m in world.parked(NOTIFY_QUEUE)]


def test_report_ready_is_posted_with_the_report_and_the_idempotency_key(webhook: WebhookFake) -> None:
    response = notify(report_generated("r-1", sha256=SHA, url="https://reports.example.com/reports/r-1"))

    assert failed_ids(response) == []
    (delivery,) = webhook.deliveries()
    assert delivery["path"] == "/report-ready"
    assert delivery["headers"]["idempotency-key"] == KEY
    assert delivery["body"] == {
        "reportId": "r-1",
        "agentId": "agent-a",
        "url": "https://reports.example.com/reports/r-1",
    }


def test_report_ready_is_sent_once_across_redelivery(world: ReportsWorld, webhook: WebhookFake) -> None:
    env = report_generated("r-1", sha256=SHA)

    responses = [notify(env, receive_count=n) for n in (1, 2, 3)]

    assert [failed_ids(r) for r in responses] == [[], [], []]
    assert webhook.deliveries_by_key() == {KEY: 1}
    assert parked_reasons(world) == []


def test_event_without_a_url_is_notified_with_the_report_api_url(
    webhook: WebhookFake, world: ReportsWorld
) -> None:
    import os

    notify(report_generated("r-1", sha256=SHA))

    (delivery,) = webhook.deliveries()
    assert delivery["body"]["url"] == f"{os.environ['REPORT_API_URL']}/reports/r-1"


def test_conflicting_replay_is_a_payload_conflict_parked_and_not_sent(
    world: ReportsWorld, webhook: WebhookFake
) -> None:
    notify(report_generated("r-1", sha256=SHA, url="https://reports.example.com/reports/r-1"))

    response = notify(
        report_generated(
            "r-1", sha256=SHA, url="https://reports.example.com/reports/other", identity=["r-1", "x"]
        )
    )

    assert failed_ids(response) == []
    assert parked_reasons(world) == ["PayloadConflict"]
    assert webhook.deliveries_by_key() == {KEY: 1}


def test_webhook_outage_is_retried_and_the_report_is_notified_once_it_recovers(
    world: ReportsWorld, webhook: WebhookFake, fast_retries: None
) -> None:
    env = report_generated("r-1", sha256=SHA)
    webhook.set_knobs(outage=True)

    during = notify(env)
    copy = world.retry_copy(NOTIFY_QUEUE, env, attempt=1)
    webhook.set_knobs(outage=False)
    after = notify_again(world, copy)

    assert failed_ids(during) == []  # handled: the delayed copy carries the retry
    assert failed_ids(after) == []
    assert webhook.deliveries_by_key() == {KEY: 1}
    assert parked_reasons(world) == []


def test_a_lost_webhook_reply_is_retried_with_the_same_idempotency_key(
    world: ReportsWorld, webhook: WebhookFake, fast_retries: None
) -> None:
    env = report_generated("r-1", sha256=SHA)
    webhook.set_knobs(fail_after_commit_rate=1.0)

    lost = notify(env)
    copy = world.retry_copy(NOTIFY_QUEUE, env, attempt=1)
    webhook.set_knobs(fail_after_commit_rate=0.0)
    retried = notify_again(world, copy)

    assert failed_ids(lost) == [] and failed_ids(retried) == []  # the retry travelled as a copy
    assert parked_reasons(world) == []
    # The subscriber did get both POSTs (only its own key dedupe can merge them) -- with ONE key.
    assert webhook.deliveries_by_key() == {KEY: 2}
    assert {d["headers"]["idempotency-key"] for d in webhook.deliveries()} == {KEY}
