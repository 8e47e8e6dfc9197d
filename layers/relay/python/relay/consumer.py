"""THE SQS batch entry point: ``return consume(event, context, handle=process_x)``.

Per record: unwrap the envelope, put its correlationId on every log line, call ``handle``. Then:

* success -> reported handled (``Processed`` metric; ``Duplicate`` is counted by relay.idempotency);
* PermanentError -> parked in the DLQ with the reason and reported handled (``Parked``); if the
  park itself fails, reported failed so SQS keeps the message -- never lost;
* TransientError or anything unknown (``Retried``), on a standard queue with a retry budget
  (``RELAY_RETRY_BUDGET_SECONDS``, set by the QueueConsumer construct) -> re-sent to its own queue with
  ``DelaySeconds`` (exponential backoff with jitter, at most 900 s), the original body byte for byte,
  its attributes and ``relay.attempt`` / ``relay.firstFailureAt`` / ``relay.lastError``, then reported
  handled (Lambda deletes the original). The copy is a new message whose ApproximateReceiveCount starts
  at 1 again, so ``maxReceiveCount`` no longer counts transient failures, only crashes and timeouts of
  the function itself; time does (``relay.retry``). A failure once the budget is spent since the first
  one raises ``RetryBudgetSpent`` (permanent): parked with the reason. If the re-send fails, or the
  original has more than 7 attributes of its own (SQS allows 10 per message and a copy must not lose
  any), the record is retried in place instead, as below -- never lost;
* TransientError or anything unknown on a FIFO queue (SQS refuses a per-message DelaySeconds there)
  or without a budget -> visibility backed off (ChangeMessageVisibility), reported failed; after
  ``maxReceiveCount`` receives the redrive policy moves it to the DLQ.

A handler that records its own next attempt time calls ``ctx.plan_retry(error)`` before re-raising the
transient error; the kernel then schedules exactly that plan (same delay).

Standard queues report only the failed messageIds (``ReportBatchItemFailures`` must be enabled on
the event source mapping -- the queue-consumer construct does that). FIFO queues stop at the
first failure and report it and every later record, because SQS FIFO must not deliver a later
message of the group before an earlier one succeeds. A parked record counts as handled, so FIFO
processing continues after it.
"""

from __future__ import annotations

# Imported before anything that pulls in pydantic: Powertools' batch module only builds its ~40 ms
# of parser models when pydantic is already loaded (aws_lambda_powertools/utilities/batch/types.py).
from aws_lambda_powertools.utilities.batch import (  # isort: skip
    BatchProcessor,
    EventType,
    SqsFifoPartialProcessor,
    process_partial_response,
)

import functools
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from relay import consumer_env
from relay.clients import AwsClients, default_client
from relay.envelope import Envelope
from relay.errors import PermanentError, RelayError, TransientError, classify
from relay.observability import logger, metrics_batch, record_metric
from relay.retry import (
    RetryBudgetSpent,
    RetryPlan,
    error_text,
    plan_retry,
    retries_done,
    retry_attributes,
)
from relay.state_machine import AlreadyApplied
from relay.unwrap import envelope_from_sqs_record

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from mypy_boto3_sqs import SQSClient

    from relay.heartbeat import Heartbeat


@dataclass(frozen=True)
class ConsumerSettings:
    """Consumer configuration, read once from the environment (``ConsumerSettings.from_env()``)."""

    queue_url: str | None = None  # RELAY_QUEUE_URL; derived from eventSourceARN when unset
    dlq_url: str | None = None  # RELAY_DLQ_URL; without it permanent failures cannot be parked
    backoff_base_seconds: float = 2.0  # RELAY_BACKOFF_BASE_SECONDS
    backoff_cap_seconds: float = 900.0  # RELAY_BACKOFF_CAP_SECONDS
    visibility_timeout_seconds: int = 300  # RELAY_VISIBILITY_TIMEOUT_SECONDS, used by heartbeat()
    # RELAY_RETRY_BUDGET_SECONDS: how long transient failures are re-sent with a delay (standard
    # queues); None retries in place until maxReceiveCount.
    retry_budget_seconds: float | None = None
    parked_ledger_table: str | None = None  # RELAY_PARKED_LEDGER_TABLE: parkings are recorded there
    service: str = "relay"  # POWERTOOLS_SERVICE_NAME

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ConsumerSettings:
        env = os.environ if environ is None else environ
        return cls(
            queue_url=env.get(consumer_env.QUEUE_URL) or None,
            dlq_url=env.get(consumer_env.DLQ_URL) or None,
            backoff_base_seconds=_number(env, consumer_env.BACKOFF_BASE_SECONDS, 2.0),
            backoff_cap_seconds=_number(env, consumer_env.BACKOFF_CAP_SECONDS, 900.0),
            visibility_timeout_seconds=int(_number(env, consumer_env.VISIBILITY_TIMEOUT_SECONDS, 300)),
            retry_budget_seconds=_budget(env),
            parked_ledger_table=env.get(consumer_env.PARKED_LEDGER_TABLE) or None,
            service=env.get("POWERTOOLS_SERVICE_NAME") or "relay",
        )


def _budget(env: Mapping[str, str]) -> float | None:
    name = consumer_env.RETRY_BUDGET_SECONDS
    if not env.get(name):
        return None
    budget = _number(env, name, 0.0)
    if budget == 0:
        raise ValueError(
            f"environment variable {name}=0: a retry budget must be positive (unset it to retry in place "
            "until maxReceiveCount)"
        )
    return budget


def _number(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not a number (default {default})") from None
    if value < 0:
        raise ValueError(f"environment variable {name}={raw!r} must not be negative")
    return value


@functools.cache
def _settings_from_env() -> ConsumerSettings:
    return ConsumerSettings.from_env()


def queue_url_from_arn(arn: str, sqs_client: SQSClient | None = None) -> str:
    """arn:aws:sqs:REGION:ACCOUNT:NAME -> queue URL, on the client's endpoint when one is given
    (so an emulator endpoint works too)."""
    parts = arn.split(":")
    if len(parts) != 6 or parts[2] != "sqs":
        raise ValueError(f"{arn!r} is not an SQS queue ARN")
    region, account, name = parts[3], parts[4], parts[5]
    endpoint = getattr(getattr(sqs_client, "meta", None), "endpoint_url", None)
    if not isinstance(endpoint, str) or not endpoint:
        endpoint = f"https://sqs.{region}.amazonaws.com"
    return f"{endpoint.rstrip('/')}/{account}/{name}"


class RecordContext:
    """What a handler may know about the SQS delivery of the envelope it is given."""

    def __init__(
        self,
        *,
        record: dict[str, Any],
        queue_url: str | Callable[[], str],
        sqs_client: SQSClient,
        visibility_timeout_seconds: int = 300,
        received_at: float | None = None,
        settings: ConsumerSettings | None = None,
        fifo: bool | None = None,
    ) -> None:
        attributes = record.get("attributes", {}) or {}
        first_ms = attributes.get("ApproximateFirstReceiveTimestamp")
        self.record = record
        self.message_id = str(record.get("messageId", ""))
        self.receipt_handle = str(record.get("receiptHandle", ""))
        self.receive_count = int(attributes.get("ApproximateReceiveCount", "1"))
        self.first_received_at = datetime.fromtimestamp(int(first_ms) / 1000, UTC) if first_ms else None
        self.sqs_client = sqs_client
        self.visibility_timeout_seconds = visibility_timeout_seconds
        # When this delivery was received, approximately (the batch start): anchors the 12 h limit.
        self.received_at = time.time() if received_at is None else received_at
        self._queue_url = queue_url
        self.settings = settings or ConsumerSettings(visibility_timeout_seconds=visibility_timeout_seconds)
        self.fifo = str(record.get("eventSourceARN", "")).endswith(".fifo") if fifo is None else fifo
        self._plan: RetryPlan | RetryBudgetSpent | None = None

    @property
    def retries_by_time(self) -> bool:
        """True when a transient failure is re-sent with a delay (a budget is set, the queue is not
        FIFO); False when it is retried in place until ``maxReceiveCount``."""
        return self.settings.retry_budget_seconds is not None and not self.fifo

    @property
    def retry_attempt(self) -> int:
        """Which retry of the delay chain this delivery is (``relay.attempt``; 0: not a retry copy).
        ``receive_count`` counts only this copy's receives: it starts at 1 again on every copy."""
        return retries_done(self.record.get("messageAttributes"))

    def plan_retry(self, error: BaseException, *, now: datetime | None = None) -> RetryPlan:
        """The retry of this delivery after the transient ``error``, decided once: the first call
        computes it, later calls (and the kernel, when the handler then raises a transient error)
        get the same plan, so a handler can record ``plan.next_attempt_at`` on its entity before
        re-raising and the message really comes back then.

        With a retry budget on a standard queue it is the delayed re-send (``relay.retry``); raises
        ``RetryBudgetSpent`` (a PermanentError: let it propagate, the message is parked) once the
        budget is spent. On a FIFO queue or without a budget it describes the in-place back-off the
        kernel will apply: ``delay_seconds`` is the visibility timeout it sets, ``attempt`` the receive
        count, ``first_failure_at`` the first receive, ``budget_seconds`` infinite (``maxReceiveCount``
        ends it, not time); it never raises.
        """
        if isinstance(self._plan, RetryBudgetSpent):
            raise self._plan
        if self._plan is not None:
            return self._plan
        moment = (now or datetime.now(UTC)).astimezone(UTC)
        settings = self.settings
        if self.retries_by_time:
            assert settings.retry_budget_seconds is not None
            try:
                plan = plan_retry(
                    self.record.get("messageAttributes"),
                    error=error,
                    now=moment,
                    budget_seconds=settings.retry_budget_seconds,
                    base=settings.backoff_base_seconds,
                    cap=settings.backoff_cap_seconds,
                )
            except RetryBudgetSpent as spent:
                self._plan = spent
                raise
        else:
            plan = self._in_place_plan(error, moment)
        self._plan = plan
        return plan

    @property
    def planned_retry(self) -> RetryPlan | None:
        """The plan ``plan_retry`` decided for this delivery, if it was called (and did not raise)."""
        return self._plan if isinstance(self._plan, RetryPlan) else None

    def _in_place_plan(self, error: BaseException, now: datetime) -> RetryPlan:
        from relay.backoff import backoff_delay

        settings = self.settings
        # What relay.backoff.apply_backoff would set; the kernel applies this very delay.
        delay = backoff_delay(
            self.receive_count,
            base=settings.backoff_base_seconds,
            cap=settings.backoff_cap_seconds,
            retry_after=getattr(error, "retry_after", None),
        )
        first = self.first_received_at
        return RetryPlan(
            attempt=self.receive_count,
            delay_seconds=delay,
            next_attempt_at=now + timedelta(seconds=delay),
            first_failure_at=min(first, now) if first is not None else now,
            budget_seconds=math.inf,
            error=error_text(error),
        )

    @property
    def queue_url(self) -> str:
        # Resolved on first use: deriving it from the ARN may need the SQS client's endpoint.
        if callable(self._queue_url):
            self._queue_url = self._queue_url()
        return self._queue_url

    def heartbeat(self, *, visibility_timeout: int | None = None, interval: float | None = None) -> Heartbeat:
        """A Heartbeat for this message: ``with ctx.heartbeat(): call_slow_system()``."""
        from relay.heartbeat import Heartbeat

        # Lambda may have received the message up to the 5-minute maximum batching window earlier.
        return Heartbeat(
            self.sqs_client,
            self.queue_url,
            self.receipt_handle,
            visibility_timeout=visibility_timeout or self.visibility_timeout_seconds,
            first_received_at=self.received_at - 300,
            interval=interval,
        )


Handle = Callable[[Envelope, RecordContext], None]


def consume(
    event: dict[str, Any],
    context: Any,
    handle: Handle,
    *,
    settings: ConsumerSettings | None = None,
    sqs_client: SQSClient | None = None,
    fifo: bool | None = None,
) -> dict[str, Any]:
    """Process an SQS event; return the partial batch response ``{"batchItemFailures": [...]}``."""
    settings = settings or _settings_from_env()
    records = event.get("Records") or []
    if fifo is None:
        fifo = bool(records) and str(records[0].get("eventSourceARN", "")).endswith(".fifo")
    processor: BatchProcessor
    if fifo:
        processor = SqsFifoPartialProcessor()
    else:
        processor = BatchProcessor(EventType.SQS)
    # Deliberate: when EVERY record fails we return the full batchItemFailures list instead of
    # letting Powertools raise BatchProcessingError. Each failure has already been classified,
    # backed off (ChangeMessageVisibility) and logged per record, and Lambda retries exactly the
    # listed messages either way. Raising would add a misleading invocation error -- the "handler
    # errors" alarm is for crashes of our code, not for a sick dependency (that shows up in the
    # Retried metric and queue-age alarms).
    processor.raise_on_entire_batch_failure = False

    batch_started = time.time()
    client_cache: list[Any] = [sqs_client]

    def client() -> Any:
        if client_cache[0] is None:
            client_cache[0] = default_client("sqs")
        return client_cache[0]

    def record_handler(record: SQSRecord) -> None:
        _process_record(record.raw_event, handle, settings, client, batch_started, fifo=bool(fifo))

    with metrics_batch():
        response: dict[str, Any] = dict(
            process_partial_response(
                event=event, record_handler=record_handler, processor=processor, context=context
            )
        )
    return response


def _process_record(
    raw: dict[str, Any],
    handle: Handle,
    settings: ConsumerSettings,
    client: Callable[[], Any],
    batch_started: float,
    *,
    fifo: bool = False,
) -> None:
    log = logger()
    event_type: str | None = None
    envelope: Envelope | None = None  # until the body is unwrapped (a poison body never is)
    log.append_keys(message_id=raw.get("messageId"))
    context = RecordContext(
        record=raw,
        queue_url=lambda: _queue_url(raw, settings, client),
        sqs_client=cast("SQSClient", _LazyClient(client)),
        visibility_timeout_seconds=settings.visibility_timeout_seconds,
        received_at=batch_started,
        settings=settings,
        fifo=fifo,
    )
    try:
        envelope = envelope_from_sqs_record(raw)
        event_type = envelope.event_type
        log.set_correlation_id(envelope.correlation_id)
        log.append_keys(event_id=envelope.event_id, event_type=envelope.event_type)
        handle(envelope, context)
        record_metric("Processed", event_type=event_type)
    except AlreadyApplied as done:
        # What this delivery asks for is in place already (a duplicate, or a concurrent delivery won)
        # and the handler let it through: acknowledged without effect, never retried or parked.
        record_metric("Duplicate", event_type=event_type)
        log.info("already applied; acknowledged without effect", extra={"reason": str(done)})
    except Exception as exc:
        error = classify(exc)
        if isinstance(error, PermanentError):
            _park_or_fail(raw, error, settings, client, envelope)
            return
        if context.retries_by_time:
            try:
                plan = context.plan_retry(error)
            except RetryBudgetSpent as spent:
                _park_or_fail(raw, spent, settings, client, envelope)
                return
            if _retry_later(raw, error, plan, settings, client, event_type):
                return  # the delayed copy is in the queue: the original is reported handled
            _back_off(raw, error, settings, client, event_type, delay=plan.delay_seconds)
        else:
            planned = context.planned_retry
            _back_off(
                raw, error, settings, client, event_type, delay=planned.delay_seconds if planned else None
            )
        if error is exc:
            raise
        raise error from exc
    finally:
        log.set_correlation_id(None)
        log.remove_keys(["message_id", "event_id", "event_type"])


class ParkingFailed(TransientError):
    """The DLQ send failed: the record is reported failed so SQS keeps it."""


def _park_or_fail(
    raw: dict[str, Any],
    error: PermanentError,
    settings: ConsumerSettings,
    client: Callable[[], Any],
    envelope: Envelope | None,
) -> None:
    from relay.parking import park
    from relay.retry import parking_record

    log = logger()
    event_type = envelope.event_type if envelope else None
    if not settings.dlq_url:
        log.error(
            "permanent failure but RELAY_DLQ_URL is not set; reporting failed so the redrive policy "
            "moves it to the DLQ after maxReceiveCount",
            extra={"error_class": type(error).__name__, "error": str(error)},
        )
        raise ParkingFailed(
            f"cannot park ({type(error).__name__}: {error}): RELAY_DLQ_URL is not set"
        ) from error
    if settings.parked_ledger_table and _parked_before(raw, settings, client):
        # The same delivery again (a duplicate, or a batch whose delete was lost): parked once.
        record_metric("ParkedAlready", event_type=event_type)
        log.info("already parked; acknowledged", extra={"error_class": type(error).__name__})
        return
    try:
        parked_id = park(
            # The chain's relay.firstFailureAt (epoch seconds) in the ISO form parking keeps.
            parking_record(raw),
            error,
            sqs_client=client(),
            dlq_url=settings.dlq_url,
            source_queue_url=_queue_url(raw, settings, client),
        )
    except Exception as park_exc:
        log.error(
            "parking failed; reporting the record failed so SQS keeps it",
            extra={"error_class": type(error).__name__, "error": str(error)},
            exc_info=True,
        )
        raise ParkingFailed(f"could not park {type(error).__name__} ({error}): {park_exc}") from park_exc
    record_metric("Parked", event_type=event_type)
    log.warning("parked", extra={"error_class": type(error).__name__, "error": str(error)})
    if settings.parked_ledger_table:
        _record_in_ledger(raw, error, settings, client, parked_id, envelope)


def _parked_before(raw: dict[str, Any], settings: ConsumerSettings, client: Callable[[], Any]) -> bool:
    """Whether the parked ledger holds this delivery already (a failed read parks: safe, maybe twice)."""
    from relay.ledger import already_parked

    try:
        return already_parked(
            default_client("dynamodb"),
            str(settings.parked_ledger_table),
            source_queue_url=_queue_url(raw, settings, client),
            message_id=str(raw.get("messageId", "")),
        )
    except Exception:
        logger().warning("parked ledger unreadable; parking", exc_info=True)
        return False


def _record_in_ledger(
    raw: dict[str, Any],
    error: PermanentError,
    settings: ConsumerSettings,
    client: Callable[[], Any],
    parked_id: str | None,
    envelope: Envelope | None,
) -> None:
    """The parking into the parked ledger (``relay.ledger``); a failure is logged, never re-parked.
    A body that is no envelope (``envelope`` None) is recorded without its ids."""
    from relay.ledger import record_parking

    try:
        record_parking(
            default_client("dynamodb"),
            str(settings.parked_ledger_table),
            source_queue_url=_queue_url(raw, settings, client),
            dlq_url=str(settings.dlq_url),
            message_id=str(raw.get("messageId", "")),
            dlq_message_id=parked_id,
            error=error,
            event_id=envelope.event_id if envelope else None,
            event_type=envelope.event_type if envelope else None,
            ids=envelope.ids if envelope else {},
            correlation_id=envelope.correlation_id if envelope else None,
        )
    except Exception:
        record_metric("LedgerWriteFailed")
        logger().error("parked, but the parked ledger could not record it", exc_info=True)


def _retry_later(
    raw: dict[str, Any],
    error: RelayError,
    plan: RetryPlan,
    settings: ConsumerSettings,
    client: Callable[[], Any],
    event_type: str | None,
) -> bool:
    """Re-send the record to its own queue for ``plan``'s retry; False when it could not be (the
    caller then retries it in place: the record is reported failed, never lost)."""
    log = logger()
    attributes, left_out = retry_attributes(raw.get("messageAttributes"), plan)
    if left_out:
        # A copy replaces the original (Lambda deletes it): dropping attributes would lose data that
        # whoever reads them relies on. Retrying in place keeps the message as it is.
        log.warning(
            "message has more attributes than a retry copy can carry; retrying in place instead "
            "(its receives count towards maxReceiveCount)",
            extra={"attributes_left_out": left_out, "attempt": plan.attempt},
        )
        return False
    try:
        client().send_message(
            QueueUrl=_queue_url(raw, settings, client),
            MessageBody=raw.get("body", ""),
            DelaySeconds=plan.delay_seconds,
            MessageAttributes=attributes,
        )
    except Exception:
        log.warning("could not re-send the message for its retry; retrying in place instead", exc_info=True)
        return False
    left = plan.budget_left_seconds(datetime.now(UTC))
    record_metric("Retried", event_type=event_type)
    log.warning(
        "transient failure; retry scheduled",
        extra={
            "error_class": type(error).__name__,
            "error": str(error),
            "attempt": plan.attempt,
            "delay_seconds": plan.delay_seconds,
            "next_attempt_at": plan.next_attempt_at.isoformat().replace("+00:00", "Z"),
            "budget_left_seconds": None if left is None else round(left),
        },
    )
    return True


def _back_off(
    raw: dict[str, Any],
    error: RelayError,
    settings: ConsumerSettings,
    client: Callable[[], Any],
    event_type: str | None,
    *,
    delay: int | None = None,
) -> None:
    """Retry in place: ChangeMessageVisibility to ``delay`` (a plan's) or the record's back-off."""
    from relay.backoff import apply_backoff

    log = logger()
    retry_after = getattr(error, "retry_after", None)
    try:
        delay = apply_backoff(
            raw,
            sqs_client=client(),
            queue_url=_queue_url(raw, settings, client),
            base=settings.backoff_base_seconds,
            cap=settings.backoff_cap_seconds,
            retry_after=retry_after,
            delay=delay,
        )
    except Exception:
        # Best effort: without it the message still comes back, after the queue's visibility timeout.
        delay = None
        log.warning("could not back off the message's visibility", exc_info=True)
    record_metric("Retried", event_type=event_type)
    log.warning(
        "transient failure; will retry",
        extra={"error_class": type(error).__name__, "error": str(error), "retry_in_seconds": delay},
    )


def _queue_url(raw: dict[str, Any], settings: ConsumerSettings, client: Callable[[], Any]) -> str:
    if settings.queue_url:  # env wins: the ARN-derived URL is only a fallback
        return settings.queue_url
    return queue_url_from_arn(str(raw.get("eventSourceARN", "")), client())


class _LazyClient:
    """Defers building the boto3 SQS client until a handler actually needs it (e.g. heartbeat)."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory

    def __getattr__(self, name: str) -> Any:
        return getattr(self._factory(), name)


LambdaHandler = Callable[[dict[str, Any], Any], dict[str, Any]]


def queue_handler[W: AwsClients](
    wiring: Callable[[], W], handle: Callable[[W, Envelope, RecordContext], object]
) -> LambdaHandler:
    """The Lambda handler of a queue consumer: Powertools logging with the Lambda context and tracing
    (``relay.observability``), the function's wiring (checked at cold start), and ``consume`` with
    ``handle(wiring, envelope, ctx)`` per record. The function's module stays one line of domain: which
    function handles a record."""
    from relay.observability import inject_lambda_context, record_subsegment, trace_handler
    from relay.settings import SettingsError
    from relay.side_effects import register_lambda_context

    @inject_lambda_context
    @trace_handler
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        wired = wiring()
        # Lets Powertools idempotency expire an IN_PROGRESS record when this invocation times out.
        register_lambda_context(context)

        def one(envelope: Envelope, ctx: RecordContext) -> None:
            # Each record in a subsegment of its own, annotated with its correlation id; parsing, parking
            # and backing off stay on the handler's.
            with record_subsegment(envelope.correlation_id, envelope.traceparent, envelope.ids):
                handle(wired, envelope, ctx)

        # The RELAY_* variables belong to the queue consumer construct that invokes us (relay.consumer_env).
        settings = ConsumerSettings.from_env()
        if not settings.dlq_url:
            # Without it a poison message could not be parked: refuse to consume at all.
            raise SettingsError(
                f"environment variable {consumer_env.DLQ_URL} is not set; a queue consumer cannot park "
                "poison messages without it (the QueueConsumer construct sets it)."
            )
        return consume(event, context, one, settings=settings, sqs_client=wired.sqs)

    return handler
