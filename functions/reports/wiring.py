"""What a reports function is wired with: settings, AWS clients, the store, the HTTP clients.

Built once per process on first use (not at import, so importing a handler is cheap and tests can
set the environment first) and passed explicitly into the domain functions. Tests start a fresh one
with ``reset_runtime()`` inside ``mock_aws``.
"""

from __future__ import annotations

import functools

from relay.clients import AwsClients
from relay.consumer import ConsumerSettings
from relay.http import WebhookClient
from reports.notification import WHAT, NotificationDeps
from reports.settings import Settings, get_settings
from reports.store import VerificationStore
from reports.verification import ReportApiClient, VerificationDeps


class Runtime(AwsClients):
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @functools.cached_property
    def verification(self) -> VerificationDeps:
        s = self.settings
        return VerificationDeps(
            store=VerificationStore(
                verifications_table=s.require("verifications_table"), ddb_client=self.ddb
            ),
            report_api=ReportApiClient(
                s.require("report_api_url"),
                timeout_seconds=s.http_timeout_seconds,
                max_bytes=s.verify_max_bytes,
            ),
            idempotency_table=s.require("idempotency_table"),
            max_age_seconds=s.verify_max_age_seconds,
        )

    @functools.cached_property
    def notification(self) -> NotificationDeps:
        s = self.settings
        return NotificationDeps(
            webhook=WebhookClient(
                s.require("notify_webhook_url"), timeout_seconds=s.http_timeout_seconds, what=WHAT
            ),
            idempotency_table=s.require("idempotency_table"),
            ddb_client=self.ddb,
            report_api_url=s.report_api_url,
        )

    @property
    def consumer_settings(self) -> ConsumerSettings:
        # Read per invocation: RELAY_QUEUE_URL / RELAY_DLQ_URL belong to the queue consumer.
        return ConsumerSettings.from_env()


@functools.cache
def runtime() -> Runtime:
    return Runtime(get_settings())


def reset_runtime() -> None:
    """Forget settings and clients (tests: after changing the environment or starting a new mock)."""
    get_settings.cache_clear()
    runtime.cache_clear()
