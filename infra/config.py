"""Stage configuration: read from `cdk.json` context, validated once, before any construct is built.

`python app.py -c stage=dev` (or `npx cdk synth -c stage=dev`) picks `context.stages.dev`; values under
`context.defaults` apply to every stage. A bad value fails synth with a message naming the key and the
rule, instead of surfacing later as a half-deployed stack.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from infra.constructs import defaults
from infra.constructs.defaults import MIN_MAX_RECEIVE_COUNT, SQS_MAX_RETENTION_DAYS, LogLevel

CDK_JSON = Path(__file__).resolve().parents[1] / "cdk.json"


class _Strict(BaseModel):
    # Unknown keys are typos until proven otherwise: fail synth rather than silently ignore them.
    model_config = ConfigDict(extra="forbid", frozen=True)


# Keys a release renamed: a stage that still sets one fails synth naming the new key.
RENAMED = {"legacy_request_keys": "request_key_items"}


def _refuse_renamed(values: Any) -> Any:
    if isinstance(values, dict):
        for old, new in RENAMED.items():
            if old in values:
                raise ValueError(f"{old} was renamed {new}: set {new} instead (same meaning)")
    return values


class QueueSettings(_Strict):
    """`queues`: every reliable queue and dead-letter queue. Defaults and reasons: `defaults.QUEUES`."""

    max_receive_count: int = Field(
        default=defaults.QUEUES.max_receive_count, ge=MIN_MAX_RECEIVE_COUNT, le=1000
    )
    retention_days: int = Field(default=defaults.QUEUES.retention_days, ge=1, le=SQS_MAX_RETENTION_DAYS)
    dlq_retention_days: int = Field(
        default=defaults.QUEUES.dlq_retention_days, ge=1, le=SQS_MAX_RETENTION_DAYS
    )
    oldest_message_alarm_seconds: int = Field(default=defaults.QUEUES.oldest_message_alarm_seconds, ge=60)


class HttpApiSettings(_Strict):
    """`http_api`: the `$default` stage of every HTTP API. Defaults and reasons: `defaults.HTTP_APIS`.
    At N payments a second an API takes about 2N requests (POST + one GET): raise the rate before the
    traffic does (`make capacity RATE=N` names the value), and the account's API Gateway throttle
    (10,000 rps per region) with it."""

    throttle_rate: int = Field(default=defaults.HTTP_APIS.throttle_rate, ge=1, le=1_000_000)
    throttle_burst: int = Field(default=defaults.HTTP_APIS.throttle_burst, ge=1, le=1_000_000)


class ConsumerSettings(_Strict):
    """`consumers`: every function, and queue consumers' event sources. Defaults: `defaults.CONSUMERS`."""

    timeout_seconds: int = Field(default=defaults.CONSUMERS.timeout_seconds, ge=1, le=900)
    memory_mb: int = Field(default=defaults.CONSUMERS.memory_mb, ge=128, le=10240)
    batch_size: int = Field(default=defaults.CONSUMERS.batch_size, ge=1, le=10000)
    batching_window_seconds: int = Field(default=defaults.CONSUMERS.batching_window_seconds, ge=0, le=300)
    # Lambda's SQS maximum concurrency accepts 2..1000.
    max_concurrency: int = Field(default=defaults.CONSUMERS.max_concurrency, ge=2, le=1000)
    # One consumer's own cap, by "<service>.<ConstructId>" (e.g. "payments.PaymentWorker"), so a busy
    # flow gets more without letting every consumer take the account's concurrency (`make capacity`
    # names who needs what). A name that matches no consumer fails synth.
    max_concurrency_by_consumer: dict[str, Annotated[int, Field(ge=2, le=1000)]] = Field(default_factory=dict)
    # How long queue consumers retry transient failures (delayed re-sends) before parking; it must stay
    # under the consumed queue's retention, which QueueConsumer checks at synth.
    retry_budget_seconds: int = Field(
        default=defaults.CONSUMERS.retry_budget_seconds,
        ge=defaults.MIN_RETRY_BUDGET_SECONDS,
        le=defaults.MAX_RETRY_BUDGET_SECONDS,
    )
    log_retention_days: int = Field(default=defaults.CONSUMERS.log_retention_days, ge=1)
    log_level: LogLevel = defaults.CONSUMERS.log_level
    log_sample_rate: float = Field(default=defaults.CONSUMERS.log_sample_rate, ge=0.0, le=1.0)
    trace_sample_rate: float = Field(default=defaults.CONSUMERS.trace_sample_rate, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _window_needed_for_big_batches(self) -> ConsumerSettings:
        # Lambda rejects a standard-queue mapping with batch size > 10 and no batching window.
        if self.batch_size > 10 and self.batching_window_seconds < 1:
            raise ValueError("batch_size > 10 requires batching_window_seconds >= 1 (Lambda rule for SQS)")
        return self


def _external_url(value: str) -> str:
    # External systems are HTTPS; plain HTTP is allowed only for the local fakes on loopback.
    if value.startswith("https://") or value.startswith(("http://127.0.0.1", "http://localhost")):
        return value.rstrip("/")
    raise ValueError("must be an https:// URL (http:// only for 127.0.0.1/localhost)")


class LifecycleConfig(_Strict):
    """How long each step of an operation may take (its budget, in time: transient failures are
    retried with backoff until then), how long a step may stay silent before the sweeper re-drives it,
    how often the sweeper runs, and how close to its expiry a non-terminal operation's claim check may
    come before an alarm."""

    pending_budget_seconds: int = Field(default=3600, ge=60, le=86_400)
    payment_budget_seconds: int = Field(default=86_400, ge=60, le=7 * 86_400)
    reconcile_budget_seconds: int = Field(default=86_400, ge=60, le=7 * 86_400)
    post_processing_budget_seconds: int = Field(default=3600, ge=60, le=86_400)
    invoice_budget_seconds: int = Field(default=86_400, ge=60, le=7 * 86_400)
    silence_seconds: int = Field(default=900, ge=60, le=86_400)
    sweep_every_minutes: int = Field(default=5, ge=1, le=60)
    claim_check_warning_days: int = Field(default=3, ge=1)

    @property
    def longest_life_seconds(self) -> int:
        """The longest a non-terminal operation can live: every step's budget plus one silence each."""
        budgets = (
            self.pending_budget_seconds,
            self.payment_budget_seconds,
            self.reconcile_budget_seconds,
            self.post_processing_budget_seconds,
            self.invoice_budget_seconds,
        )
        return sum(budgets) + len(budgets) * self.silence_seconds


class PaymentsConfig(_Strict):
    legacy_payments_url: str = "https://legacy-payments.example.com"
    invoice_api_url: str = "https://invoices.example.com"
    legacy_timeout_seconds: int = Field(default=10, ge=1, le=60)
    # "Accepted, still processing" is re-checked until this age, then the operation is RECONCILING.
    payment_max_age_seconds: int = Field(default=3600, ge=60, le=86_400)
    payment_check_base_delay_seconds: int = Field(default=30, ge=1, le=900)
    max_body_bytes: int = Field(default=1_048_576, ge=1024, le=6_000_000)
    # Claim check only when large: a request, result or invoice input above this many bytes of
    # canonical JSON goes to S3; below it, it travels inline (in the operation item or the event).
    claim_check_threshold_bytes: int = Field(default=65_536, ge=1024, le=300 * 1024)
    # A stage upgraded from the layout with request-key items: the API looks a key up there first, so a
    # retry of a request accepted before the upgrade is answered, not accepted twice. Turn it off once
    # request_key_ttl_days (the longest TTL) have passed since the upgrade.
    request_key_items: bool = False

    _renamed = model_validator(mode="before")(_refuse_renamed)
    terminal_ttl_days: int = Field(default=30, ge=1)
    failed_ttl_days: int = Field(default=90, ge=1)
    # The deadline index's shards (relay.deadlines): each is one index partition (1,000 WU/s) and every
    # payment costs 2 index writes, so 64 keep 10,000 payments/s at 31 % of a partition. More: deploy
    # the new count. Fewer: deploy it with deadline_read_shards = the old count, run
    # `python -m ops deadlines --rebalance`, then deploy without deadline_read_shards.
    deadline_shards: int = Field(default=64, ge=1, le=1000)
    deadline_read_shards: int | None = Field(default=None, ge=1, le=1000)
    claim_check_expiration_days: int = Field(default=30, ge=1)
    lifecycle: LifecycleConfig = LifecycleConfig()
    # Completion notices to clients' callback URLs (payments.notices): how long one POST may take, and
    # how long a receiver may stay unreachable before its notice is parked (RetryBudgetSpent).
    notice_timeout_seconds: int = Field(default=5, ge=1, le=30)
    notice_retry_budget_seconds: int = Field(default=86_400, ge=60, le=86_400 * 3)
    # Plain-http callback URLs on loopback: for a stage whose receivers are local fakes only. On AWS a
    # loopback URL would be the function's own sandbox, so it is refused (SSRF guard) unless set.
    callback_allow_loopback_http: bool = False

    @field_validator("legacy_payments_url", "invoice_api_url")
    @classmethod
    def _https(cls, value: str) -> str:
        return _external_url(value)

    @model_validator(mode="after")
    def _read_shards(self) -> PaymentsConfig:
        if self.deadline_read_shards is not None and self.deadline_read_shards <= self.deadline_shards:
            raise ValueError(
                f"deadline_read_shards ({self.deadline_read_shards}) is for a move to FEWER shards: the "
                f"count before, above deadline_shards ({self.deadline_shards}). Readers always read "
                "deadline_shards; remove deadline_read_shards once `python -m ops deadlines --rebalance` "
                "has emptied the shards above it."
            )
        return self


class ReportsConfig(_Strict):
    report_api_url: str = "https://reports.example.com"
    notify_webhook_url: str = "https://hooks.example.com/report-ready"
    verify_max_age_seconds: int = Field(default=3600, ge=60, le=86_400)
    http_timeout_seconds: int = Field(default=5, ge=1, le=30)

    @field_validator("report_api_url", "notify_webhook_url")
    @classmethod
    def _https(cls, value: str) -> str:
        return _external_url(value)


class ScoresConfig(_Strict):
    # IANA time zone of the hourly schedule ("minute 0 of every hour" in that zone).
    timezone: str = Field(default="UTC", min_length=1)
    # None → this app's own scores API; set it to call an existing backend instead.
    snapshot_endpoint: str | None = None
    rate_limit_per_second: int = Field(default=defaults.SCHEDULED_CALLS.rate_limit_per_second, ge=1, le=300)
    schedule_retry_attempts: int = Field(
        default=defaults.SCHEDULED_CALLS.schedule_retry_attempts, ge=0, le=185
    )
    target_retry_attempts: int = Field(default=defaults.SCHEDULED_CALLS.target_retry_attempts, ge=0, le=185)
    max_event_age_seconds: int = Field(
        default=defaults.SCHEDULED_CALLS.max_event_age_seconds, ge=60, le=86_400
    )

    @field_validator("snapshot_endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith("https://"):
            raise ValueError("must be an https:// URL (API destinations call HTTPS endpoints only)")
        return value

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown IANA time zone {value!r}") from None
        return value


class OrdersConfig(_Strict):
    notify_webhook_url: str = "https://hooks.example.com/order-events"
    # The external shipping API the shipping consumer asks for each paid order's shipment.
    shipping_api_url: str = "https://shipping.example.com"
    http_timeout_seconds: int = Field(default=5, ge=1, le=30)
    analytics_retention_days: int = Field(default=400, ge=1)
    # A stage upgraded from the layout with request-key items (before one write per step): the API
    # looks a key up there first. Turn it off 7 days (their TTL) after the upgrade.
    request_key_items: bool = False

    _renamed = model_validator(mode="before")(_refuse_renamed)

    @field_validator("notify_webhook_url", "shipping_api_url")
    @classmethod
    def _https(cls, value: str) -> str:
        return _external_url(value)


class LoyaltyConfig(_Strict):
    # The accrual rule: points per unit ordered, credited once per paid order.
    points_per_unit: int = Field(default=10, ge=0, le=10_000)


class StageConfig(_Strict):
    stage: str = Field(pattern=r"^[a-z][a-z0-9-]{1,15}$")
    account: str | None = Field(default=None, pattern=r"^\d{12}$")
    region: str = Field(default="us-east-1", pattern=r"^[a-z]{2}(-[a-z]+)+-\d$")
    metrics_namespace: str = Field(default="Relay", min_length=1, max_length=255)
    # DynamoDB deletion protection on every table. A protected table is retained on stack deletion even in
    # a disposable stage: CloudFormation could not delete it anyway.
    deletion_protection: bool = False
    # What `cdk destroy` does to the resources that hold data or evidence: DLQs (parked messages), the
    # buckets (claim checks, analytics archive, their access logs), log groups, tables and the alarm
    # topic's KMS key. A disposable stage (dev, a sandbox account) deletes them with its stacks; any
    # other stage RETAINS them, to be deleted by hand. Retain is the default because forgetting this
    # line must never destroy a stage's data: a stage has to say it is disposable.
    disposable: bool = False
    alarm_email: str | None = Field(default=None, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
    queues: QueueSettings = QueueSettings()
    consumers: ConsumerSettings = ConsumerSettings()
    http_api: HttpApiSettings = HttpApiSettings()
    payments: PaymentsConfig = PaymentsConfig()
    reports: ReportsConfig = ReportsConfig()
    scores: ScoresConfig = ScoresConfig()
    orders: OrdersConfig = OrdersConfig()
    loyalty: LoyaltyConfig = LoyaltyConfig()

    @model_validator(mode="after")
    def _claim_checks_outlive_redrive(self) -> StageConfig:
        # A message can wait in its queue for `retention_days`, then in the DLQ for `dlq_retention_days`
        # before someone redrives it: its claim check must still exist then.
        needed = self.queues.retention_days + self.queues.dlq_retention_days
        if self.payments.claim_check_expiration_days < needed:
            raise ValueError(
                f"payments.claim_check_expiration_days ({self.payments.claim_check_expiration_days}) must be "
                f">= queues.retention_days + queues.dlq_retention_days ({needed})"
            )
        # A non-terminal operation's request must outlive the operation, with the warning days to spare.
        lifecycle = self.payments.lifecycle
        life_days = -(-lifecycle.longest_life_seconds // 86_400) + lifecycle.claim_check_warning_days
        if self.payments.claim_check_expiration_days < life_days:
            raise ValueError(
                f"payments.claim_check_expiration_days ({self.payments.claim_check_expiration_days}) must be "
                f">= the longest life of a non-terminal operation plus payments.lifecycle."
                f"claim_check_warning_days ({life_days} days)"
            )
        # The workers retry a sick partner for their step's budget: their messages must outlive it.
        longest_budget = max(lifecycle.payment_budget_seconds, lifecycle.invoice_budget_seconds)
        if self.queues.retention_days * 86_400 <= longest_budget:
            raise ValueError(
                f"queues.retention_days ({self.queues.retention_days}) must exceed the longest step budget "
                f"({longest_budget} s)"
            )
        return self

    @property
    def prefix(self) -> str:
        return f"relay-{self.stage}"


class ConfigError(Exception):
    """Raised when the stage config in cdk.json is missing or invalid. Synth stops with this message."""


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def parse_stage_config(stage: str, defaults: dict[str, Any], stages: dict[str, Any]) -> StageConfig:
    if stage not in stages:
        known = ", ".join(sorted(stages)) or "none"
        raise ConfigError(f"stage {stage!r} is not defined under context.stages in cdk.json (known: {known})")
    raw = _merge(defaults, stages[stage] or {})
    raw["stage"] = stage
    try:
        return StageConfig.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"stages.{stage}.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"invalid stage config in cdk.json: {problems}") from None


def cdk_json_context() -> dict[str, Any]:
    """The `context` block of the repository's cdk.json (what the CDK CLI passes to the app)."""
    return dict(json.loads(CDK_JSON.read_text()).get("context", {}))


def load_stage_config(scope: Any) -> StageConfig:
    """Read `-c stage=...` (default `dev`) and the matching block from the app's context.

    The CDK CLI passes cdk.json's context to the app; when the app runs without the CLI (`python app.py`,
    tests), cdk.json is read directly so both see the same config."""
    node = scope.node
    file_context = cdk_json_context()
    stage = node.try_get_context("stage") or file_context.get("stage") or "dev"
    defaults = node.try_get_context("defaults") or file_context.get("defaults") or {}
    stages = node.try_get_context("stages") or file_context.get("stages") or {}
    return parse_stage_config(str(stage), defaults, stages)
