"""What a reports function is wired with: settings, AWS clients, the store, the HTTP clients.

Built once per process on first use (``relay.wiring``) and passed explicitly into the domain
functions, which take only what they use (``VerificationDeps``, ``NotificationDeps``).
"""

from __future__ import annotations

import functools

from relay.side_effects import OnceWebhook
from relay.wiring import ServiceWiring, Wired
from reports.notification import WHAT, NotificationDeps
from reports.settings import Settings
from reports.store import VerificationStore
from reports.verification import ReportApiClient, VerificationDeps


class Wiring(ServiceWiring[Settings]):
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
            max_age_seconds=s.verify_max_age_seconds,
        )

    @functools.cached_property
    def notification(self) -> NotificationDeps:
        s = self.settings
        webhook = OnceWebhook.of(
            s.require("notify_webhook_url"),
            timeout_seconds=s.http_timeout_seconds,
            what=WHAT,
            idempotency_table=s.require("idempotency_table"),
            ddb_client=self.ddb,
        )
        return NotificationDeps(webhook=webhook, report_api_url=s.report_api_url)


wiring = Wired(lambda: Wiring(Settings.from_env()))
