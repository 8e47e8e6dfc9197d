"""What a payments function is wired with: settings, AWS clients, the store, the HTTP clients.

Built once per process on first use (``relay.wiring``) and passed explicitly into the domain
functions, which take only what they use (``payments.step_rules.StepDeps``). Clients are created lazily:
the API never builds an SQS or SNS client.
"""

from __future__ import annotations

import functools

from payments.invoices import InvoiceApiClient
from payments.legacy import LegacyPaymentsClient
from payments.notices import NoticeDeps
from payments.settings import Settings
from payments.store import OperationStore
from relay.clients import aws_client
from relay.wiring import ServiceWiring, Wired


class Wiring(ServiceWiring[Settings]):
    @functools.cached_property
    def store(self) -> OperationStore:
        return OperationStore(
            operations_table=self.settings.require("operations_table"),
            # None for the sweeper, which never dedupes (its writes are conditional on what it read).
            idempotency_table=self.settings.idempotency_table,
            ddb_client=self.ddb,
            deadline_shards=self.settings.deadline_shards,
        )

    @functools.cached_property
    def bucket(self) -> str:
        return self.settings.require("payments_bucket")

    @functools.cached_property
    def legacy(self) -> LegacyPaymentsClient:
        return LegacyPaymentsClient(
            self.settings.require("legacy_payments_url"), timeout_seconds=self.settings.legacy_timeout_seconds
        )

    @functools.cached_property
    def invoices(self) -> InvoiceApiClient:
        return InvoiceApiClient(
            self.settings.require("invoice_api_url"), timeout_seconds=self.settings.legacy_timeout_seconds
        )

    @functools.cached_property
    def notices(self) -> NoticeDeps:
        from aws_lambda_powertools.utilities.parameters import SecretsProvider

        secrets = SecretsProvider(boto3_client=aws_client("secretsmanager"))
        arn = self.settings.require("notice_signing_secret_arn")

        def secret() -> str:
            # Powertools keeps it for 5 minutes: a rotated secret is picked up without a cold start.
            return str(secrets.get(arn, max_age=300))

        return NoticeDeps(
            store=self.store,
            secret=secret,
            allow_loopback_http=self.settings.callback_allow_loopback_http,
            timeout_seconds=self.settings.notice_timeout_seconds,
        )


wiring = Wired(lambda: Wiring(Settings.from_env()))
