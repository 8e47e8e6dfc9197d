"""Every default the Relay constructs apply, in one place, as data, each with the reason for its value.

Constructs read their fallbacks from here, and the stage config (`infra/config.py`) takes the defaults of
the settings a stage may override in `cdk.json` from here too, so "what a stage gets unless it says
otherwise" is written once. The limits these values must respect (AWS quotas, Relay rules) sit beside
them; the guards (`infra/guards.py`) check the synthesized templates against the same constants.

Standard library only: the config and the guards import it without the CDK.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]

# --- rules and AWS limits ------------------------------------------------------------------------------

# Relay rule: below 5 receives, a short dependency outage or a Lambda scale-up burst (Lambda's poller
# receives more than the function can take) parks healthy messages in the DLQ.
MIN_MAX_RECEIVE_COUNT: Final = 5
# AWS guidance for Lambda + SQS: a consumed queue's visibility timeout is at least 6 × the function
# timeout, so a message cannot become visible again while an earlier attempt on it still runs.
VISIBILITY_FACTOR: Final = 6
# SQS: the visibility timeout cannot exceed 12 hours (the heartbeat never asks for more).
SQS_MAX_VISIBILITY_SECONDS: Final = 43_200
# SQS: messages are kept at most 14 days.
SQS_MAX_RETENTION_DAYS: Final = 14
# SQS: a FIFO event source takes at most 10 messages per batch, and no batching window.
FIFO_MAX_BATCH_SIZE: Final = 10
# Relay rule: a retry budget (how long the kernel re-sends a transiently failing message with a delay,
# `relay.retry`) of less than a minute parks healthy messages on a blip, as a low maxReceiveCount would.
MIN_RETRY_BUDGET_SECONDS: Final = 60
# Relay rule: the budget stays under the consumed queue's retention (QueueConsumer checks that), and
# retention is at most SQS_MAX_RETENTION_DAYS (14). When a re-send is refused the kernel retries the
# message in place, where it ages: it must outlive its budget and still be received and parked. 12 days
# leave two days for a backlog to drain to it.
MAX_RETRY_BUDGET_SECONDS: Final = 12 * 86_400


@dataclass(frozen=True)
class QueueDefaults:
    """Reliable queues and every dead-letter queue (overridable per stage under `queues`)."""

    # The lowest value the rule above allows: a poison message is parked after 5 tries, not 50.
    max_receive_count: int = MIN_MAX_RECEIVE_COUNT
    # SQS's own default; a consumer that is down longer than that is an incident long before.
    retention_days: int = 4
    # The SQS maximum: a parked message waits as long as possible for someone to notice and redrive it.
    dlq_retention_days: int = SQS_MAX_RETENTION_DAYS
    # SQS's default; QueueConsumer raises it to VISIBILITY_FACTOR × its function timeout.
    visibility_timeout_seconds: int = 30
    # 15 minutes without progress is a stuck or far too slow consumer, not a burst.
    oldest_message_alarm_seconds: int = 900


@dataclass(frozen=True)
class ConsumerDefaults:
    """Every Relay function, and the SQS event source of queue consumers (per stage under `consumers`)."""

    # Long enough for a call to an external system with its own timeout (≤ 10 s) and a retry.
    timeout_seconds: int = 30
    # Lambda's CPU share grows with memory: 512 MB keeps cold starts (pydantic, Powertools) short.
    memory_mb: int = 512
    # The most Lambda takes from a standard queue without a batching window (and FIFO_MAX_BATCH_SIZE).
    batch_size: int = 10
    # Gather up to a second of messages per invocation: fewer invocations under load, ≤ 1 s latency.
    batching_window_seconds: int = 1
    # Caps how hard one consumer can hit its dependencies (and the account's concurrency) in a backlog.
    max_concurrency: int = 5
    # Transient failures are retried for an hour (delayed re-sends, at most 15 min apart), then parked
    # with the reason: long enough for a deploy, a failover or a partner's restart; a longer outage is an
    # incident, and its messages wait in the DLQ to be redriven once it is over.
    retry_budget_seconds: int = 3600
    # A month of logs to investigate an incident; older evidence lives in metrics and the parked ledger.
    log_retention_days: int = 30
    # Powertools log level: WARNING logs every retry, park, conflict and error (the kernel logs them at
    # WARNING or ERROR) but not each successful step, whose evidence is the operation's own step
    # history and the EMF metrics. INFO lines were ~90 % of a payment's CloudWatch Logs bytes ($0.9 of
    # $1.08 per 1M payments, docs/cost.md); a stage someone is investigating sets INFO or DEBUG.
    log_level: LogLevel = "WARNING"
    # Powertools log sampling (POWERTOOLS_LOGGER_SAMPLE_RATE): this fraction of invocations log at
    # DEBUG, so the happy path stays visible at 1 % of its log cost. 0 turns sampling off.
    log_sample_rate: float = 0.01
    # The share of traces kept (OpenTelemetry's parent-based ratio sampler, OTEL_TRACES_SAMPLER_ARG).
    # A trace is kept or dropped whole: the API's root span decides and every consumer follows the
    # traceparent's sampled flag. Spans are billed as CloudWatch Logs ingestion (Transaction Search): at
    # 5 % (X-Ray's default rule's rate) they cost a payment $0.54 per 1M, at 1 % a fifth of that
    # (docs/cost.md, lever 4). Any operation's log lines are found by its correlation id, traced or not;
    # a stage being investigated raises it, 1.0 keeps every trace.
    trace_sample_rate: float = 0.01


@dataclass(frozen=True)
class OutboxStreamDefaults:
    """The DynamoDB-stream mapping of an outbox publisher."""

    # Outbox rows are small; a large batch drains a backlog in few invocations.
    batch_size: int = 100
    batching_window_seconds: int = 1
    # A failing batch is retried in order this often before its stream coordinates go to the DLQ; the
    # rows stay unpublished in the table, ready for a re-drive.
    retry_attempts: int = 20
    # Concurrent batches per shard. 1 (Lambda's default): each invocation takes the shard's whole
    # window of records, up to 100. 5 split them over five lanes by partition key, so the publisher ran
    # 0.83 times per payment instead of 0.17 (make cost: $11.02 -> $10.52 per 1M payments,
    # docs/cost.md). One lane publishes ~100 records per invocation; raise it (up to 10) for a stage
    # whose stream shards carry more than that per invocation time, or whose slow aggregate holds others up.
    parallelization_factor: int = 1


@dataclass(frozen=True)
class HttpApiDefaults:
    """The `$default` stage of every HTTP API."""

    # Requests per second, steady and burst: well above the expected load, well below the account limit.
    throttle_rate: int = 100
    throttle_burst: int = 200


@dataclass(frozen=True)
class BucketDefaults:
    """Private buckets and their access-log buckets."""

    # Server access logs are kept a quarter: long enough to audit who read a claim check.
    access_log_expiration_days: int = 90


@dataclass(frozen=True)
class ScheduledCallDefaults:
    """Scheduler → bus → rule → API destination (the scores stack's settings default to these)."""

    # One call a second is plenty for one event an hour, and protects the endpoint during a replay.
    rate_limit_per_second: int = 1
    # Both hops retry with backoff before giving up to their DLQ.
    schedule_retry_attempts: int = 10
    target_retry_attempts: int = 10
    # Two hours: an hourly snapshot still undelivered by then goes to the DLQ, to be redriven on purpose,
    # instead of being retried behind the next hours' calls.
    max_event_age_seconds: int = 7200


@dataclass(frozen=True)
class AlarmDefaults:
    """Every Relay alarm."""

    # One-minute periods, one breaching period: a parked message or a crash is worth a page at once.
    period_seconds: int = 60
    evaluation_periods: int = 1


@dataclass(frozen=True)
class KeyDefaults:
    """Customer-managed KMS keys (the alarm topic's)."""

    # The shortest window AWS allows before a key scheduled for deletion is gone.
    pending_window_days: int = 7


QUEUES: Final = QueueDefaults()
CONSUMERS: Final = ConsumerDefaults()
OUTBOX_STREAM: Final = OutboxStreamDefaults()
HTTP_APIS: Final = HttpApiDefaults()
BUCKETS: Final = BucketDefaults()


@dataclass(frozen=True)
class BusRuleDefaults:
    """Event bus → rule → reliable queue (`BusRule`)."""

    # EventBridge's own defaults are 185 attempts over 24 hours; a queue target that refuses is a
    # permissions or deletion problem, not a blip: give up sooner, to the target DLQ (alarmed), where
    # the events wait for the fix and a redrive instead of a day of silent retries.
    retry_attempts: int = 10
    max_event_age_seconds: int = 3600


SCHEDULED_CALLS: Final = ScheduledCallDefaults()
BUS_RULES: Final = BusRuleDefaults()
ALARMS: Final = AlarmDefaults()
KEYS: Final = KeyDefaults()
