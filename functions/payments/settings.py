"""The payments functions' settings and, per function, the ones it needs (``relay.settings``: the stack
and the function read the same declaration); the legacy payment system and invoice API base URLs
come from the stage config.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import ClassVar

from pydantic import Field, field_validator

from payments.operations import Status
from relay import deadlines
from relay.claim_check import DEFAULT_THRESHOLD_BYTES
from relay.settings import FunctionEnvironment, OutboxSettings, http_url

# SQS DelaySeconds accepts at most 900 seconds; a longer wait is a chain of delayed checks.
MAX_SQS_DELAY_SECONDS = 900


class Settings(OutboxSettings):
    SERVICE: ClassVar[str] = "payments"

    operations_table: str | None = None
    payments_bucket: str | None = None
    # The partners, and how long a call to either may take.
    legacy_payments_url: str | None = None
    legacy_timeout_seconds: float = Field(10.0, gt=0, le=900)
    invoice_api_url: str | None = None
    payment_max_age_seconds: int = Field(3600, gt=0)
    payment_check_base_delay_seconds: int = Field(30, ge=0, le=MAX_SQS_DELAY_SECONDS)
    max_body_bytes: int = Field(1_048_576, gt=0)
    # Claim check only when large: a request, result or invoice input whose canonical JSON is larger
    # than this goes to S3 (its reference in the item or the event); smaller ones travel inline.
    claim_check_threshold_bytes: int = Field(DEFAULT_THRESHOLD_BYTES, ge=0, le=300 * 1024)
    # Upgrading a stage that accepted payments with Idempotency-Keys before the one-write layout: its
    # request-key items (kept request_key_ttl_days) are looked up before accepting, so a client's
    # retry of a request accepted then is answered, not accepted twice. Turn off once they expired.
    request_key_items: bool = False
    terminal_ttl_days: int = Field(30, gt=0)
    failed_ttl_days: int = Field(90, gt=0)
    # The deadline index's shard count (``relay.deadlines``): what writers hash into. While a stage moves
    # to FEWER shards, ``deadline_read_shards`` is the count before, so readers still read its shards.
    deadline_shards: int = Field(deadlines.DEFAULT_SHARDS, ge=1, le=1000)
    deadline_read_shards: int | None = Field(None, ge=1, le=1000)
    # The lifecycle (stage config ``payments.lifecycle``): how long each step may take before it is
    # given up (its budget, in time), and how long a step may stay silent -- no attempt, no retry
    # scheduled -- before the sweeper takes its message for lost and re-drives it.
    pending_budget_seconds: int = Field(3600, gt=0)
    payment_budget_seconds: int = Field(86_400, gt=0)
    reconcile_budget_seconds: int = Field(86_400, gt=0)
    post_processing_budget_seconds: int = Field(3600, gt=0)
    invoice_budget_seconds: int = Field(86_400, gt=0)
    silence_seconds: int = Field(900, gt=0)
    # The sweeper's claim-check guard: alarm when a non-terminal operation's request is this close
    # to the bucket's expiry.
    claim_check_expiration_days: int = Field(30, gt=0)
    claim_check_warning_days: int = Field(3, ge=0)
    # Completion notices (``payments.notices``): a callback URL may be plain http on loopback only
    # where the stage says so (the sandbox, whose receivers are local fakes); the signing key.
    callback_allow_loopback_http: bool = False
    notice_signing_secret_arn: str | None = None
    notice_timeout_seconds: float = Field(5.0, gt=0, le=30)

    def budget_seconds(self, status: Status) -> int:
        """The budget of the step a non-terminal state belongs to, counted from entering the state."""
        return {
            Status.PENDING: self.pending_budget_seconds,
            Status.PAYMENT_PROCESSING: self.payment_budget_seconds,
            Status.RECONCILING: self.reconcile_budget_seconds,
            Status.PAYMENT_COMPLETED: self.post_processing_budget_seconds,
            Status.POST_PROCESSING: self.post_processing_budget_seconds,
            Status.INVOICE_PENDING: self.invoice_budget_seconds,
        }[status]

    def deadline_after(self, moment: datetime) -> datetime:
        """The deadline of a step whose next attempt is due at ``moment``: silent past it, the
        sweeper takes the step's message for lost."""
        return moment + timedelta(seconds=self.silence_seconds)

    def redrive_deadline(
        self, moment: datetime, *, status: Status, since: datetime, redrives: int
    ) -> datetime:
        """The deadline after the sweeper's ``redrives + 1``-th re-drive of a step: one silence after
        the first, doubling after each further one, and never past the moment the sweeper gives the
        step up (its budget and one silence from ``since``). A step found silent is most often one whose
        message waits behind a backlog, not one whose message was lost: re-driving it every silence
        would add a copy per silence to the very queue that is behind (``make chaos`` measured 2,600
        re-drives into a 5,000-message payment backlog); doubling adds a few at most."""
        backoff = moment + timedelta(seconds=self.silence_seconds * 2 ** min(redrives, 16))
        give_up = since + timedelta(seconds=self.budget_seconds(status) + self.silence_seconds)
        return max(self.deadline_after(moment), min(backoff, give_up))

    @property
    def deadline_shards_to_read(self) -> int:
        """How many shards readers read: the larger of the count and the read count."""
        return max(self.deadline_shards, self.deadline_read_shards or 0)

    @property
    def deadlines(self) -> dict[Status, int]:
        """When the sweeper first looks at an operation after it enters each non-terminal state."""
        return {status: self.silence_seconds for status in Status if not status.terminal}

    @property
    def request_key_ttl_days(self) -> int:
        """How long a client's Idempotency-Key stays bound: as long as the longest-kept operation, so a
        retry never creates a second operation while the first can still be read."""
        return max(self.terminal_ttl_days, self.failed_ttl_days)

    @field_validator("legacy_payments_url", "invoice_api_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        return http_url(value, example="https://legacy.example.com")


# What each function needs (the stack sets exactly these; the function checks them at cold start).
# An item's lifetime: its TTLs, and where it sits in the deadline index.
_TTLS = ("terminal_ttl_days", "failed_ttl_days", "deadline_shards", "deadline_read_shards")
LIFECYCLE = (
    "pending_budget_seconds",
    "payment_budget_seconds",
    "reconcile_budget_seconds",
    "post_processing_budget_seconds",
    "invoice_budget_seconds",
    "silence_seconds",
)
API = FunctionEnvironment(
    Settings,
    "api",
    required=("operations_table", "idempotency_table", "payments_bucket"),
    optional=(
        "max_body_bytes",
        *_TTLS,
        "silence_seconds",
        "callback_allow_loopback_http",
        "claim_check_threshold_bytes",
        "request_key_items",
    ),
)
OUTBOX_PUBLISHER = FunctionEnvironment(
    Settings, "outbox-publisher", required=("operations_table", "events_topic_arn")
)
PAYMENT_WORKER = FunctionEnvironment(
    Settings,
    "payment-worker",
    required=("operations_table", "idempotency_table", "payments_bucket", "legacy_payments_url"),
    optional=(
        *_TTLS,
        *LIFECYCLE,
        "legacy_timeout_seconds",
        "payment_max_age_seconds",
        "payment_check_base_delay_seconds",
        "claim_check_threshold_bytes",
    ),
)
POST_PROCESSOR = FunctionEnvironment(
    Settings,
    "post-processor",
    required=("operations_table", "idempotency_table", "payments_bucket"),
    optional=(*_TTLS, *LIFECYCLE, "claim_check_threshold_bytes"),
)
INVOICE_WORKER = FunctionEnvironment(
    Settings,
    "invoice-worker",
    required=("operations_table", "idempotency_table", "payments_bucket", "invoice_api_url"),
    optional=(*_TTLS, *LIFECYCLE, "legacy_timeout_seconds"),
)
NOTICE_SENDER = FunctionEnvironment(
    Settings,
    "notice-sender",
    required=("operations_table", "idempotency_table", "notice_signing_secret_arn"),
    optional=("callback_allow_loopback_http", "notice_timeout_seconds"),
)
SWEEPER = FunctionEnvironment(
    Settings,
    "sweeper",
    required=("operations_table", "events_topic_arn"),
    optional=(*_TTLS, *LIFECYCLE, "claim_check_expiration_days", "claim_check_warning_days"),
)
