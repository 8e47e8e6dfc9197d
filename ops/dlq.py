"""``python -m ops dlq sample|redrive``: read why messages were parked, and move them back.

Reading a DLQ is not free: SQS has no "peek". Every read is a ReceiveMessage, which adds one to the
message's receive count and hides it from every other reader for the visibility timeout. So both
commands say so and ask first (``--yes`` skips the question), receive with a short visibility timeout,
and give each message back at once (ChangeMessageVisibility 0) unless they move it. A DLQ in this app
has no RedrivePolicy of its own, so the higher receive counts cannot move anything further; a queue
that has one is refused (``--force`` to sample it anyway), since sampling it would burn its receives.

What a parked message says (``relay.parking``): the attributes ``relay.errorClass``,
``relay.errorMessage``, ``relay.firstFailureAt``, ``relay.originalMessageId``, ``relay.receiveCount``
and ``relay.sourceQueue``; a retry copy carries ``relay.attempt`` and ``relay.lastError``. The body is
the original one: an envelope, or an SNS notification wrapping one (enveloped subscriptions). It is
shown as its field names only, never its values (they may hold personal data), unless
``--show-body``.

A redrive:

1. ``--dry-run``: receives EVERY message (each held invisible while the DLQ is read, then released),
   counts them by error class and event type, moves nothing;
2. the first batch (``--first N``, 5): receives N, sends each to its source queue (``relay.sourceQueue``
   when it names one of the stage's queues, else the queue whose RedrivePolicy targets the DLQ) and
   deletes it from the DLQ; then waits (``--verify-timeout``) until the source queue is back to the
   backlog it had before, checks that none of the N came back to the DLQ (by the parked copy's
   ``relay.originalMessageId`` and the envelope's ``eventId``), and asks ``verify_business`` whether
   each event had its effect once (``ops.checks``: the processed marker, the operation's state, the
   side-effect record, as its consumer leaves them; plus any ``register_business_check``);
3. the rest with SQS's own move task (StartMessageMoveTask, ``--rate`` messages a second), polled for
   progress while the DLQ is watched: a DLQ deeper than what is left to move means new parks, and the
   task is cancelled (CancelMessageMoveTask), as it is on Ctrl-C. A ``--filter`` redrive cannot use the
   move task (it moves every message), so it moves the matching ones one by one at the rate instead.

Every redrive, dry runs included, needs a ``--reason`` and ends with an audit record (who, from STS
GetCallerIdentity; when; the reason; the DLQ; the counts; the outcome), printed and appended to
``--audit-file`` (JSON lines). Exit codes: 0 done, 1 stopped (the first batch failed, new parks, the
move task failed or was cancelled), 2 a usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ops.app import App, OpsError, QueueInfo, add_connection_arguments, connect
from ops.status import AgeReading, AgeSource, age_source

SAMPLE_VISIBILITY_SECONDS = 30  # how long a sampled message is hidden at most (released at once)
SCAN_VISIBILITY_SECONDS = 120  # a dry run or a filtered redrive holds what it read while it reads on
MOVE_VISIBILITY_SECONDS = 60  # a message being moved by hand: send + delete take well under that
RECEIVE_WAIT_SECONDS = 1  # long poll: a short poll may answer "empty" while messages exist
STALE_ROUNDS = 3  # receives that bring nothing new before a scan ends
DEFAULT_AUDIT_FILE = Path(".ops/redrive-audit.jsonl")
RELAY_ATTRIBUTES = (
    "relay.errorClass",
    "relay.errorMessage",
    "relay.firstFailureAt",
    "relay.originalMessageId",
    "relay.receiveCount",
    "relay.sourceQueue",
    "relay.attempt",
    "relay.lastError",
)
# What EventBridge (a rule target's DLQ) and Scheduler (a schedule's DLQ) say about a dead letter.
EVENTBRIDGE_ATTRIBUTES = (
    "ERROR_CODE",
    "ERROR_MESSAGE",
    "EXHAUSTED_RETRY_CONDITION",
    "RETRY_ATTEMPTS",
    "RULE_ARN",
    "SCHEDULE_ARN",
    "TARGET_ARN",
    "EXECUTION_ID",
)
STREAM_FAILURE = "Lambda on-failure record of a stream batch (not a message: the records stay in the stream)"
FILTER_KEYS = ("errorClass", "eventType")

EXIT_OK, EXIT_STOPPED, EXIT_USAGE = 0, 1, 2


# -- the business checks hook ------------------------------------------------------------------------

BusinessCheck = Callable[[App, Sequence["Moved"]], list[str]]
_BUSINESS_CHECKS: list[BusinessCheck] = []


def register_business_check(check: BusinessCheck) -> BusinessCheck:
    """Add a check run after a redrive's first batch, beside ``ops.checks``' own: ``check(app, batch)``
    returns problems (empty: fine). Usable as a decorator."""
    _BUSINESS_CHECKS.append(check)
    return check


def verify_business(app: App, batch: Sequence[Moved]) -> list[str]:
    """The business state checks of the first batch: each event's effect, as its consumer records it
    (``ops.checks``), and every registered check's problems."""
    from ops.checks import first_batch_problems

    problems = first_batch_problems(app, batch)
    for check in _BUSINESS_CHECKS:
        problems.extend(check(app, batch))
    return problems


# -- what a parked message says --------------------------------------------------------------------


@dataclass(frozen=True)
class Received:
    """A message as ReceiveMessage returned it (all system and message attributes)."""

    message_id: str
    receipt_handle: str
    body: str
    attributes: Mapping[str, str]
    message_attributes: Mapping[str, Mapping[str, Any]]

    @classmethod
    def of(cls, message: Mapping[str, Any]) -> Received:
        return cls(
            message_id=str(message["MessageId"]),
            receipt_handle=str(message["ReceiptHandle"]),
            body=str(message.get("Body", "")),
            attributes={str(k): str(v) for k, v in (message.get("Attributes") or {}).items()},
            message_attributes=dict(message.get("MessageAttributes") or {}),
        )

    def attribute(self, name: str) -> str | None:
        value = self.message_attributes.get(name) or {}
        text = value.get("StringValue")
        return str(text) if text not in (None, "", "-") else None


@dataclass(frozen=True)
class Parked:
    """One DLQ message, read: why it was parked, what it is, and its body's shape."""

    message_id: str
    reasons: Mapping[str, str]  # the relay.* attributes present, without the prefix
    event_type: str | None
    event_id: str | None
    ids: Mapping[str, str]
    correlation_id: str | None
    route: str  # "envelope", "SNS notification (topic …)", "EventBridge event", "unreadable"
    problem: str | None  # why the body is not a readable envelope (the kernel's words when it has them)
    shape: str  # the body's field names
    body: str
    receive_count: int  # ApproximateReceiveCount in the DLQ (this read included)
    sent_at: str | None

    @property
    def error_class(self) -> str:
        return (
            self.reasons.get("errorClass")
            or self.reasons.get("ERROR_CODE")
            or (
                "(a stream batch)"
                if self.route == STREAM_FAILURE
                else "(no reason: moved by a redrive policy?)"
            )
        )

    @property
    def original_message_id(self) -> str | None:
        return self.reasons.get("originalMessageId")

    @property
    def source_queue(self) -> str | None:
        return self.reasons.get("sourceQueue")

    def matches(self, filters: Mapping[str, str]) -> bool:
        values = {"errorClass": self.reasons.get("errorClass"), "eventType": self.event_type}
        return all(values.get(key) == wanted for key, wanted in filters.items())

    def to_json(self, *, show_body: bool) -> dict[str, Any]:
        document: dict[str, Any] = {
            "messageId": self.message_id,
            "reasons": dict(self.reasons),
            "eventType": self.event_type,
            "eventId": self.event_id,
            "ids": dict(self.ids),
            "correlationId": self.correlation_id,
            "route": self.route,
            "problem": self.problem,
            "bodyFields": self.shape,
            "receiveCount": self.receive_count,
            "sentAt": self.sent_at,
        }
        if show_body:
            document["body"] = self.body
        return document


def read_parked(message: Received) -> Parked:
    reasons = {
        name.removeprefix("relay."): value
        for name in (*RELAY_ATTRIBUTES, *EVENTBRIDGE_ATTRIBUTES)
        if (value := message.attribute(name)) is not None
    }
    event_type, event_id, ids, correlation, route, problem = _identify(message)
    sent = message.attributes.get("SentTimestamp")
    return Parked(
        message_id=message.message_id,
        reasons=reasons,
        event_type=event_type,
        event_id=event_id,
        ids=ids,
        correlation_id=correlation,
        route=route,
        problem=problem,
        shape=body_shape(message.body),
        body=message.body,
        receive_count=int(message.attributes.get("ApproximateReceiveCount", 0)),
        sent_at=_iso_ms(sent) if sent else None,
    )


def _identify(
    message: Received,
) -> tuple[str | None, str | None, dict[str, str], str | None, str, str | None]:
    """eventType, eventId, ids, correlationId, route, problem: the kernel's unwrap when it can read
    the body (``relay.unwrap``, importable when layers/relay/python is on the path, as in the tests),
    else (or when it refuses the body) a minimal reading of the same routes."""
    found = _minimal(message.body)
    if found[4] == STREAM_FAILURE:
        return found
    try:
        from relay.errors import InvalidInput
        from relay.unwrap import envelope_from_sqs_record
    except ImportError:
        return found
    record = {
        "messageId": message.message_id,
        "body": message.body,
        "attributes": {},
        "messageAttributes": {},
    }
    try:
        envelope = envelope_from_sqs_record(record)
    except InvalidInput as exc:
        return (*found[:5], str(exc))
    except Exception as exc:  # the kernel classifies worse things too; a sample must still show the rest
        return (*found[:5], f"{type(exc).__name__}: {exc}")
    return (
        envelope.event_type,
        envelope.event_id,
        dict(envelope.ids),
        envelope.correlation_id,
        found[4],
        None,
    )


def _minimal(body: str) -> tuple[str | None, str | None, dict[str, str], str | None, str, str | None]:
    try:
        document = json.loads(body)
    except ValueError:
        return None, None, {}, None, "unreadable", "the body is not JSON"
    route = "envelope"
    if (
        isinstance(document, dict)
        and "requestContext" in document
        and ("DDBStreamBatchInfo" in document or "KinesisBatchInfo" in document)
    ):
        return None, None, {}, None, STREAM_FAILURE, None
    if isinstance(document, dict) and document.get("Type") == "Notification" and "Message" in document:
        topic = str(document.get("TopicArn", "?")).rsplit(":", 1)[-1]
        route = f"SNS notification (topic {topic})"
        try:
            document = json.loads(str(document["Message"]))
        except ValueError:
            return None, None, {}, None, route, "the SNS Message is not JSON"
    elif isinstance(document, dict) and "detail-type" in document and "detail" in document:
        route = "EventBridge event"
        detail = document.get("detail")
        if not (isinstance(detail, dict) and "eventId" in detail):
            # The kernel builds the envelope of such an event from the EventBridge event id.
            return _text(document.get("detail-type")), None, {}, _text(document.get("id")), route, None
        document = detail
    if not isinstance(document, dict):
        return None, None, {}, None, route, f"the message is JSON {type(document).__name__}, not an envelope"
    ids = document.get("ids")
    problem = None if "eventId" in document and "eventType" in document else "no eventId/eventType"
    return (
        _text(document.get("eventType")),
        _text(document.get("eventId")),
        {str(k): str(v) for k, v in ids.items()} if isinstance(ids, dict) else {},
        _text(document.get("correlationId")),
        route,
        problem,
    )


def _text(value: Any) -> str | None:
    return str(value) if isinstance(value, str | int) and not isinstance(value, bool) else None


def body_shape(body: str, *, depth: int = 4) -> str:
    """The body's field names, never its values: ``{Type, Message: {eventId, payload: {amount}}}``. A
    JSON string that holds JSON (SNS's ``Message``) is shown as what it holds."""
    try:
        document = json.loads(body)
    except ValueError:
        return f"<{len(body.encode())} bytes, not JSON>"
    return _shape(document, depth)


def _shape(value: Any, depth: int) -> str:
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return _shape(json.loads(value), depth)
        except ValueError:
            pass
    if isinstance(value, dict):
        if depth <= 0:
            return "{…}"
        parts = []
        for key in value:
            inner = value[key]
            parts.append(f"{key}: {_shape(inner, depth - 1)}" if _nested(inner) else str(key))
        return "{" + ", ".join(parts) + "}"
    if isinstance(value, list):
        return f"[{len(value)} items]"
    return type(value).__name__


def _nested(value: Any) -> bool:
    if isinstance(value, dict):
        return True
    if isinstance(value, str) and value[:1] == "{":
        try:
            return isinstance(json.loads(value), dict)
        except ValueError:
            return False
    return False


# -- receiving without taking ------------------------------------------------------------------------


class Reader:
    """Receives from one queue and gives back what it did not take."""

    def __init__(self, app: App, queue: QueueInfo, *, visibility: int) -> None:
        self.sqs = app.client("sqs")
        self.queue = queue
        self.visibility = visibility
        self.receives = 0

    def receive(self, limit: int = 10) -> list[Received]:
        self.receives += 1
        response = self.sqs.receive_message(
            QueueUrl=self.queue.url,
            MaxNumberOfMessages=max(1, min(10, limit)),
            WaitTimeSeconds=RECEIVE_WAIT_SECONDS,
            VisibilityTimeout=self.visibility,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        return [Received.of(m) for m in response.get("Messages", [])]

    def scan(
        self, limit: int, *, keep: Callable[[Received], bool] | None = None
    ) -> tuple[list[Received], list[Received]]:
        """Distinct messages until ``limit`` of them are ``keep``-ed or the queue has nothing new, all
        held invisible: (kept, others). The caller releases or moves them."""
        kept: dict[str, Received] = {}
        others: dict[str, Received] = {}
        stale = 0
        while len(kept) < limit and stale < STALE_ROUNDS:
            batch = self.receive(limit - len(kept) if keep is None else 10)
            if not batch:
                break
            new = 0
            for message in batch:
                seen = message.message_id in kept or message.message_id in others
                new += not seen
                # The newest receipt handle: the one a visibility change or a delete must use.
                if keep is None or keep(message):
                    if message.message_id in kept or len(kept) < limit:
                        kept[message.message_id] = message
                        others.pop(message.message_id, None)
                        continue
                others[message.message_id] = message
            stale = 0 if new else stale + 1
        return list(kept.values()), list(others.values())

    def release(self, messages: Iterable[Received]) -> int:
        """Visible again at once (ChangeMessageVisibility 0); returns how many SQS refused (a handle
        whose visibility had already run out: that message is visible anyway)."""
        pending = list(messages)
        refused = 0
        for start in range(0, len(pending), 10):
            chunk = pending[start : start + 10]
            response = self.sqs.change_message_visibility_batch(
                QueueUrl=self.queue.url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m.receipt_handle, "VisibilityTimeout": 0}
                    for i, m in enumerate(chunk)
                ],
            )
            refused += len(response.get("Failed", []))
        return refused


def depth(app: App, queue: QueueInfo) -> tuple[int, int, int]:
    """(visible, in flight, delayed) now."""
    attributes = app.client("sqs").get_queue_attributes(
        QueueUrl=queue.url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    return (
        int(attributes.get("ApproximateNumberOfMessages", 0)),
        int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
        int(attributes.get("ApproximateNumberOfMessagesDelayed", 0)),
    )


def check_samplable(dlq: QueueInfo, *, force: bool) -> None:
    """Refuse a queue whose own RedrivePolicy would count our receives towards moving its messages."""
    if dlq.has_redrive_policy and not force:
        target = dlq.dlq.short if dlq.dlq else dlq.dlq_arn
        raise OpsError(
            f"{dlq.short} has a RedrivePolicy of its own (maxReceiveCount {dlq.max_receive_count} → "
            f"{target}): every sample adds a receive and can move its messages on. A DLQ of this app has "
            "none; if you are sure, --force"
        )


def confirm(warning: str, *, assume_yes: bool, out: Callable[[str], None] = print) -> bool:
    out(warning)
    if assume_yes:
        return True
    if not sys.stdin.isatty():
        raise OpsError("not a terminal, so nothing can be confirmed: pass --yes to go ahead")
    answer = input("Continue? Type 'yes': ")
    return answer.strip().lower() == "yes"


def sample_warning(dlq: QueueInfo, n: int, *, visibility: int) -> str:
    return (
        f"WARNING: sampling RECEIVES up to {n} message(s) from {dlq.name}: each one's receive count goes up "
        f"by one, and it is hidden from every other reader for up to {visibility} s (it is released at "
        "once after reading). "
        + (
            "The queue has no RedrivePolicy of its own, so nothing is moved by it."
            if not dlq.has_redrive_policy
            else "The queue HAS a RedrivePolicy (--force): receives count towards it."
        )
    )


def sample(app: App, dlq: QueueInfo, n: int) -> list[Parked]:
    """Read up to ``n`` messages (held for at most SAMPLE_VISIBILITY_SECONDS, released at once)."""
    reader = Reader(app, dlq, visibility=SAMPLE_VISIBILITY_SECONDS)
    messages: list[Received] = []
    extra: list[Received] = []
    try:
        messages, extra = reader.scan(n)
        return [read_parked(m) for m in messages]
    finally:
        reader.release([*messages, *extra])


def describe(parked: Parked, index: int, total: int, *, show_body: bool, prefix: str) -> list[str]:
    lines = [
        f"message {index}/{total}  {parked.message_id}  "
        f"(received {parked.receive_count}×, sent {parked.sent_at})"
    ]
    if not parked.reasons and parked.route != STREAM_FAILURE:
        lines.append("  no reason attributes: moved here by a redrive policy (maxReceiveCount), not parked")
    for name, value in parked.reasons.items():
        if name == "sourceQueue":
            value = value.rstrip("/").rsplit("/", 1)[-1].removeprefix(f"{prefix}-")
        lines.append(f"  {name:<18} {value}")
    lines.append(f"  {'eventType':<18} {parked.event_type or '-'}")
    lines.append(f"  {'eventId':<18} {parked.event_id or '-'}")
    ids = ", ".join(f"{k}={v}" for k, v in parked.ids.items()) or "-"
    lines.append(f"  {'ids':<18} {ids}")
    lines.append(f"  {'correlationId':<18} {parked.correlation_id or '-'}")
    lines.append(f"  {'route':<18} {parked.route}" + (f"; {parked.problem}" if parked.problem else ""))
    if show_body:
        lines.append(f"  {'body':<18} {parked.body}")
    else:
        lines.append(f"  {'body':<18} REDACTED, fields only: {parked.shape}  (--show-body to print it)")
    return lines


# -- redrive ---------------------------------------------------------------------------------------


@dataclass
class RedriveOptions:
    reason: str
    dry_run: bool = False
    first: int = 5
    rate: int | None = None
    filters: Mapping[str, str] = field(default_factory=dict)
    verify_timeout: float = 300.0
    poll_seconds: float = 5.0
    scan_limit: int = 10_000
    audit_file: Path = DEFAULT_AUDIT_FILE
    assume_yes: bool = False
    force: bool = False


@dataclass
class Moved:
    parked: Parked
    destination: str
    new_message_id: str


class Stopped(Exception):
    """The redrive stopped on purpose (exit 1); the message says why and what to do."""


class Redrive:
    """One ``ops dlq redrive`` run. ``sleep``/``clock``/``ages``/``business`` are injectable for tests."""

    def __init__(
        self,
        app: App,
        dlq: QueueInfo,
        options: RedriveOptions,
        *,
        out: Callable[[str], None] = print,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        ages: AgeSource | None = None,
        business: BusinessCheck = verify_business,
    ) -> None:
        self.app = app
        self.dlq = dlq
        self.options = options
        self.out = out
        self.sleep = sleep
        self.clock = clock
        self.ages = ages
        self.business = business
        self.sqs = app.client("sqs")
        self.moved: list[Moved] = []
        self.move_task_moved = 0
        self.counts: dict[str, Any] = {}
        self._queues = {q.name: q for q in app.queues()}
        self._last_send = 0.0

    # where messages go ------------------------------------------------------------------------

    @property
    def redrive_source(self) -> QueueInfo | None:
        """The queue whose RedrivePolicy targets this DLQ, when exactly one does."""
        sources = [self._queues[n] for n in self.dlq.sources if n in self._queues]
        return sources[0] if len(sources) == 1 else None

    def destination(self, parked: Parked) -> QueueInfo | None:
        """``relay.sourceQueue`` when it names one of the stage's (non-DLQ) queues, else the queue
        EventBridge failed to deliver to (a bus rule's target DLQ: ``TARGET_ARN``), else the redrive
        source. Never a queue outside the stage: the attribute is data, not an address to trust."""
        if parked.source_queue:
            name = parked.source_queue.rstrip("/").rsplit("/", 1)[-1]
            queue = self._queues.get(name)
            if queue is not None and not queue.is_dlq:
                return queue
        target = parked.reasons.get("TARGET_ARN", "")
        if target.startswith("arn:aws:sqs:"):
            queue = self._queues.get(target.rsplit(":", 1)[-1])
            if queue is not None and not queue.is_dlq:
                return queue
        return self.redrive_source

    # the run ----------------------------------------------------------------------------------------

    def run(self) -> int:
        started = datetime.now(UTC)
        outcome, detail, code = "ok", "", EXIT_OK
        try:
            check_samplable(self.dlq, force=self.options.force)
            if self.options.dry_run:
                self._dry_run()
                outcome, detail = "dry-run", "nothing moved"
            else:
                self._redrive()
                detail = f"moved {self._total_moved()} message(s)"
        except Stopped as exc:
            outcome, detail, code = "stopped", str(exc), EXIT_STOPPED
            self.out(f"STOPPED: {exc}")
        except KeyboardInterrupt:
            outcome, detail, code = "interrupted", "Ctrl-C", EXIT_STOPPED
            self.out("interrupted (Ctrl-C)")
        except OpsError as exc:
            outcome, detail, code = "refused", str(exc), EXIT_USAGE
            self.out(f"error: {exc}")
        except Exception as exc:  # AWS refused something: recorded as such, then reported by the CLI
            outcome, detail = "error", f"{type(exc).__name__}: {exc}"
            raise
        finally:
            self._audit(started, outcome, detail)
        return code

    def _total_moved(self) -> int:
        return len(self.moved) + self.move_task_moved

    def _read_all(self) -> list[Parked]:
        """Every DLQ message (up to ``--scan-limit``), read and released at once."""
        reader = Reader(self.app, self.dlq, visibility=SCAN_VISIBILITY_SECONDS)
        held: list[Received] = []
        try:
            held, _ = reader.scan(self.options.scan_limit)
            return [read_parked(m) for m in held]
        finally:
            reader.release(held)

    def _dry_run(self) -> None:
        visible, in_flight, _ = depth(self.app, self.dlq)
        parked = self._read_all()
        matching = [p for p in parked if p.matches(self.options.filters)]
        by_class = Counter(p.error_class for p in matching)
        by_type = Counter(p.event_type or "(unreadable)" for p in matching)
        by_destination = Counter(
            (d.short if (d := self.destination(p)) else "(nowhere: no source queue)") for p in matching
        )
        self.counts = {
            "inDlq": visible + in_flight,
            "read": len(parked),
            "wouldMove": len(matching),
            "byErrorClass": dict(by_class),
            "byEventType": dict(by_type),
            "byDestination": dict(by_destination),
        }
        where = f" matching {_filters_text(self.options.filters)}" if self.options.filters else ""
        self.out(
            f"dry run: read {len(parked)} of ~{visible + in_flight} message(s); "
            f"{len(matching)} would move{where}"
        )
        for title, counter in (
            ("by error class", by_class),
            ("by event type", by_type),
            ("to", by_destination),
        ):
            self.out(f"  {title}:")
            for key, count in counter.most_common():
                self.out(f"    {count:6d}  {key}")
        if len(parked) >= self.options.scan_limit:
            self.out(f"  (stopped reading at --scan-limit {self.options.scan_limit})")

    def _redrive(self) -> None:
        visible, in_flight, _ = depth(self.app, self.dlq)
        self.counts = {"inDlqAtStart": visible + in_flight}
        if visible + in_flight == 0:
            self.out(f"{self.dlq.short} is empty: nothing to redrive")
            return
        first = self._first_batch()
        if not first:
            self.out("nothing moved" + (" (nothing matched the filter)" if self.options.filters else ""))
            return
        self._verify(first)
        if self.options.filters:
            self._move_one_by_one()
        else:
            self._move_task()
        self.counts["moved"] = self._total_moved()

    # the first batch --------------------------------------------------------------------------

    def _first_batch(self) -> list[Moved]:
        n = self.options.first
        filters = self.options.filters
        reader = Reader(self.app, self.dlq, visibility=MOVE_VISIBILITY_SECONDS)
        if filters:
            kept, others = reader.scan(n, keep=lambda m: read_parked(m).matches(filters))
        else:
            kept, others = reader.scan(n)
        reader.release(others)
        destinations = {d.name for p in map(read_parked, kept) if (d := self.destination(p))}
        self._baseline = {name: self._total(self._queues[name]) for name in destinations}
        self.out(f"first batch: moving {len(kept)} message(s)")
        batch: list[Moved] = []
        skipped: list[Received] = []
        try:
            for message in kept:
                moved = self._move(message)
                if moved is None:
                    skipped.append(message)
                else:
                    batch.append(moved)
        except BaseException:
            # Give back at once what was not moved, rather than leave it hidden for the visibility.
            done = {m.parked.message_id for m in batch}
            with contextlib.suppress(Exception):
                reader.release([m for m in kept if m.message_id not in done])
            raise
        reader.release(skipped)
        self.counts["firstBatch"] = len(batch)
        return batch

    def _move(self, message: Received) -> Moved | None:
        """Send to the source queue, then delete from the DLQ. In that order: a crash in between leaves
        a duplicate in the source queue, which the consumers' processed markers make harmless, and
        never a lost message."""
        parked = read_parked(message)
        destination = self.destination(parked)
        if destination is None:
            self.out(
                f"  {message.message_id}: left in the DLQ: no source queue (no relay.sourceQueue, "
                "and no queue's RedrivePolicy targets this DLQ)"
            )
            return None
        self._pace()
        request: dict[str, Any] = {"QueueUrl": destination.url, "MessageBody": message.body}
        attributes = _send_attributes(message.message_attributes)
        if attributes:
            request["MessageAttributes"] = attributes
        if destination.fifo:
            request["MessageGroupId"] = message.attributes.get("MessageGroupId") or "relay-redrive"
            # Our own retry of this send dedupes; the original's dedup id might drop it as a repeat.
            request["MessageDeduplicationId"] = f"redrive-{message.message_id}"[:128]
        new_id = str(self.sqs.send_message(**request)["MessageId"])
        self.sqs.delete_message(QueueUrl=self.dlq.url, ReceiptHandle=message.receipt_handle)
        moved = Moved(parked, destination.name, new_id)
        self.moved.append(moved)
        # The parked ledger: this message is parked no more (keyed by its original messageId).
        from ops.ledger import mark_moved

        mark_moved(
            self.app,
            parked.reasons.get("sourceQueue") or destination.url,
            [parked.reasons.get("originalMessageId", "")],
            reason=self.options.reason,
        )
        self.out(
            f"  moved {message.message_id} → {destination.short} as {new_id}"
            f"  ({parked.error_class}; {parked.event_type or '?'} {parked.event_id or ''})".rstrip()
        )
        return moved

    def _pace(self) -> None:
        rate = self.options.rate
        if not rate:
            return
        wait = self._last_send + 1.0 / rate - self.clock()
        if wait > 0:
            self.sleep(wait)
        self._last_send = self.clock()

    def _total(self, queue: QueueInfo) -> int:
        return sum(depth(self.app, queue))

    def _verify(self, batch: Sequence[Moved]) -> None:
        """The source queues are back to their backlog before the batch, none of the batch is back in
        the DLQ, and the business checks have nothing to say."""
        expected_dlq = self.counts["inDlqAtStart"] - len(batch)
        deadline = self.clock() + self.options.verify_timeout
        waiting = dict(self._baseline)
        self.out(
            f"verifying: waiting up to {self.options.verify_timeout:.0f} s for the consumer(s) to drain "
            "the batch"
        )
        while waiting:
            for name in list(waiting):
                queue = self._queues[name]
                visible, in_flight, delayed = depth(self.app, queue)
                if visible + in_flight + delayed <= waiting[name]:
                    del waiting[name]
                    self.out(f"  {queue.short}: drained (back to {visible + in_flight + delayed})")
            if not waiting:
                break
            if self.clock() >= deadline:
                left = ", ".join(
                    f"{self._queues[n].short} holds {self._describe_depth(self._queues[n])}" for n in waiting
                )
                raise Stopped(
                    f"the first batch was not consumed within {self.options.verify_timeout:.0f} s ({left}); "
                    "is the consumer running (python -m ops status)? Nothing more was moved"
                )
            self.sleep(self.options.poll_seconds)
        back = self._back_in_dlq(batch, expected_dlq)
        if back:
            reasons = "; ".join(
                f"{p.event_id or p.message_id}: {p.error_class}: {p.reasons.get('errorMessage', '')}"
                for p in back[:5]
            )
            raise Stopped(
                f"{len(back)} of the first batch's {len(batch)} message(s) were parked again ({reasons}). "
                "The cause is not fixed; nothing more was moved"
            )
        problems = self.business(self.app, batch)
        if problems:
            raise Stopped("the business checks failed after the first batch: " + "; ".join(problems))
        self.out(f"first batch OK: {len(batch)} consumed, none parked again")

    def _describe_depth(self, queue: QueueInfo) -> str:
        visible, in_flight, delayed = depth(self.app, queue)
        text = f"{visible} visible, {in_flight} in flight, {delayed} delayed"
        if delayed:
            text += " (delayed: retries the kernel scheduled)"
        return text

    def _back_in_dlq(self, batch: Sequence[Moved], expected: int) -> list[Parked]:
        """The batch's messages found in the DLQ again: only read (a sample of the DLQ) when its depth
        says something arrived."""
        visible, in_flight, _ = depth(self.app, self.dlq)
        if visible + in_flight <= expected:
            return []
        new_ids = {m.new_message_id for m in batch}
        event_ids = {m.parked.event_id for m in batch if m.parked.event_id}
        parked = self._read_all()
        back = [
            p for p in parked if p.original_message_id in new_ids or (p.event_id and p.event_id in event_ids)
        ]
        if not back:
            self.out(
                f"  note: the DLQ holds {visible + in_flight - expected} more than expected, none of "
                "them from the first batch (other traffic is being parked)"
            )
        return back

    # the rest ---------------------------------------------------------------------------------------

    def _move_task(self) -> None:
        destination = self.redrive_source
        if destination is None:
            raise Stopped(
                f"no queue's RedrivePolicy targets {self.dlq.short}, so SQS's move task has nowhere to send "
                "the rest; move them by hand with --filter (e.g. --filter errorClass=…), one by one"
            )
        visible, in_flight, _ = depth(self.app, self.dlq)
        start = visible + in_flight
        if start == 0:
            self.out("the rest: nothing left in the DLQ")
            return
        if not hasattr(self.sqs, "start_message_move_task"):
            raise Stopped("this botocore has no StartMessageMoveTask; upgrade boto3")
        request: dict[str, Any] = {"SourceArn": self.dlq.arn, "DestinationArn": destination.arn}
        if self.options.rate:
            request["MaxNumberOfMessagesPerSecond"] = self.options.rate
        try:
            handle = str(self.sqs.start_message_move_task(**request)["TaskHandle"])
        except Exception as exc:  # moto (and the sandbox until it has one) do not implement it
            raise Stopped(
                f"StartMessageMoveTask failed ({type(exc).__name__}: {exc}); the first batch was moved and "
                "verified: move the rest one by one with --filter (e.g. --filter errorClass=<class>)"
            ) from None
        task_started = datetime.now(UTC)
        rate = f"{self.options.rate}/s" if self.options.rate else "SQS's own pace"
        self.out(
            f"the rest: SQS move task {handle[:16]}… started "
            f"({start} message(s) → {destination.short}, {rate})"
        )
        strikes = 0
        try:
            while True:
                self.sleep(self.options.poll_seconds)
                task = self._task()
                status = str(task.get("Status", "?"))
                moved = int(task.get("ApproximateNumberOfMessagesMoved", 0))
                to_move = int(task.get("ApproximateNumberOfMessagesToMove", start) or start)
                self.move_task_moved = moved
                visible, in_flight, _ = depth(self.app, self.dlq)
                now_in_dlq = visible + in_flight
                new_parks = now_in_dlq - max(start - moved, 0)
                age = self._source_age(destination)
                self.out(
                    f"  {status.lower()}: {moved}/{to_move} moved; DLQ {now_in_dlq} (left to move "
                    f"{max(start - moved, 0)}); {destination.short} oldest {age.describe()}"
                )
                if status == "COMPLETED":
                    break
                if status in ("CANCELLED", "CANCELLING", "FAILED"):
                    raise Stopped(
                        f"the move task ended {status}: {task.get('FailureReason', 'no reason given')}"
                    )
                strikes = strikes + 1 if new_parks > 0 else 0
                if strikes >= 2:  # twice in a row: not a count that lags behind the moves
                    self._cancel(handle, f"{new_parks} new message(s) parked while moving")
                    raise Stopped(
                        f"{new_parks} message(s) were parked again while the move task ran; cancelled it "
                        f"after {moved} moved. Sample the DLQ (python -m ops dlq sample {self.dlq.short})"
                    )
        except KeyboardInterrupt:
            self._cancel(handle, "Ctrl-C")
            raise
        self.out(f"the rest: move task COMPLETED, {self.move_task_moved} moved")
        from ops.ledger import mark_parked_before

        marked = mark_parked_before(self.app, destination.url, task_started, reason=self.options.reason)
        noun = "entry" if marked == 1 else "entries"
        self.out(f"parked ledger: {marked} {noun} of {destination.short} marked REDRIVEN")

    def _task(self) -> Mapping[str, Any]:
        results = self.sqs.list_message_move_tasks(SourceArn=self.dlq.arn, MaxResults=1).get("Results", [])
        if not results:
            raise Stopped("ListMessageMoveTasks shows no task for the DLQ")
        task: Mapping[str, Any] = results[0]
        return task

    def _cancel(self, handle: str, why: str) -> None:
        try:
            response = self.sqs.cancel_message_move_task(TaskHandle=handle)
            self.out(
                f"cancelled the move task ({why}); "
                f"{response.get('ApproximateNumberOfMessagesMoved', '?')} moved"
            )
        except Exception as exc:  # already finished, or the endpoint refuses: say so, stop anyway
            self.out(f"could not cancel the move task ({why}): {exc}")

    def _source_age(self, queue: QueueInfo) -> AgeReading:
        if self.ages is None:
            self.ages = age_source(self.app)
        return self.ages.read([queue]).get(queue.name, AgeReading(None))

    def _move_one_by_one(self) -> None:
        filters = self.options.filters
        self.out(
            f"the rest: one by one (a --filter redrive cannot use SQS's move task, which moves every "
            f"message), matching {_filters_text(filters)}"
            + (f", {self.options.rate}/s" if self.options.rate else "")
        )
        ours = {m.new_message_id for m in self.moved}
        event_ids = {m.parked.event_id for m in self.moved if m.parked.event_id}
        reader = Reader(self.app, self.dlq, visibility=SCAN_VISIBILITY_SECONDS)
        held: dict[str, Received] = {}
        stale = 0
        moved_here = 0
        try:
            while stale < STALE_ROUNDS:
                batch = reader.receive(10)
                if not batch:
                    break
                new = 0
                for message in batch:
                    if message.message_id in held:
                        held[message.message_id] = message  # reappeared: keep the newest handle
                        continue
                    new += 1
                    parked = read_parked(message)
                    if not parked.matches(filters):
                        held[message.message_id] = message
                        continue
                    if parked.original_message_id in ours or (
                        parked.event_id and parked.event_id in event_ids
                    ):
                        held[message.message_id] = message
                        raise Stopped(
                            f"{parked.event_id or parked.message_id} came back to the DLQ after being moved "
                            f"({parked.error_class}); stopped after {moved_here} more"
                        )
                    moved = self._move(message)
                    if moved is None:
                        held[message.message_id] = message
                        continue
                    moved_here += 1
                    ours.add(moved.new_message_id)
                    if parked.event_id:
                        event_ids.add(parked.event_id)
                stale = 0 if new else stale + 1
        finally:
            reader.release(held.values())
        self.out(f"the rest: moved {moved_here} more one by one")

    # the audit record ---------------------------------------------------------------------------

    def _audit(self, started: datetime, outcome: str, detail: str) -> None:
        try:
            who = self.app.caller()
        except Exception as exc:  # still record the redrive: the operator's login is the next best thing
            who = f"unknown (GetCallerIdentity failed: {type(exc).__name__})"
        destination = self.redrive_source
        record = {
            "at": _iso(started),
            "finishedAt": _iso(datetime.now(UTC)),
            "who": who,
            "operator": getpass.getuser(),
            "stage": self.app.stage,
            "region": self.app.effective_region,
            "endpoint": self.app.endpoint_url,
            "dlq": self.dlq.name,
            "destination": destination.name if destination else None,
            "reason": self.options.reason,
            "dryRun": self.options.dry_run,
            "filters": dict(self.options.filters),
            "first": self.options.first,
            "rate": self.options.rate,
            "counts": {
                **self.counts,
                "movedByHand": len(self.moved),
                "movedByMoveTask": self.move_task_moved,
            },
            "eventIds": [m.parked.event_id for m in self.moved if m.parked.event_id][:100],
            "outcome": outcome,
            "detail": detail,
        }
        line = json.dumps(record, sort_keys=True)
        path = self.options.audit_file
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as audit:
            audit.write(line + "\n")
        self.out(f"audit ({path}): {line}")


def _send_attributes(attributes: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """ReceiveMessage's attributes as SendMessage takes them: the reason travels with the message (a
    park after the redrive keeps ``relay.firstFailureAt``), everything else unchanged."""
    converted: dict[str, dict[str, Any]] = {}
    for name, value in attributes.items():
        data_type = value.get("DataType")
        if not data_type:
            continue
        if value.get("StringValue") is not None:
            converted[name] = {"DataType": data_type, "StringValue": value["StringValue"]}
        elif value.get("BinaryValue") is not None:
            converted[name] = {"DataType": data_type, "BinaryValue": value["BinaryValue"]}
    return converted


def parse_filters(values: Sequence[str] | None) -> dict[str, str]:
    filters: dict[str, str] = {}
    for value in values or ():
        key, sep, wanted = value.partition("=")
        if not sep or key not in FILTER_KEYS or not wanted:
            raise OpsError(f"--filter {value!r}: expected errorClass=<class> or eventType=<type>")
        filters[key] = wanted
    return filters


def _filters_text(filters: Mapping[str, str]) -> str:
    return " and ".join(f"{k}={v}" for k, v in filters.items())


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _iso_ms(epoch_ms: str) -> str | None:
    try:
        return _iso(datetime.fromtimestamp(int(epoch_ms) / 1000, UTC))
    except ValueError:
        return None


# -- the commands ---------------------------------------------------------------------------------


def register(subparsers: Any) -> None:
    dlq = subparsers.add_parser(
        "dlq",
        help="sample a DLQ (why messages were parked) or redrive it",
        description="Read why messages were parked, and move them back to their source queue.",
    )
    commands = dlq.add_subparsers(dest="dlq_command", metavar="{sample,redrive}", required=True)

    sample_parser = commands.add_parser(
        "sample",
        help="show N parked messages: reason, eventType, eventId, ids, correlationId; body redacted",
        description="Receive up to N messages from a DLQ, show each one's reason (the relay.* attributes), "
        "eventType, eventId, business ids and correlationId, with the body reduced to its field names; "
        "then release them (ChangeMessageVisibility 0). Receiving raises each message's receive count and "
        "hides it for up to 30 s: it asks first (--yes to skip).",
    )
    sample_parser.add_argument(
        "dlq", metavar="DLQ", help="e.g. payments-payment-requests-dlq or payment-requests-dlq"
    )
    sample_parser.add_argument("-n", type=int, default=5, help="how many messages (default 5, at most 100)")
    sample_parser.add_argument(
        "--show-body", action="store_true", help="print bodies (they may hold personal data)"
    )
    sample_parser.add_argument("--yes", action="store_true", help="do not ask before receiving")
    sample_parser.add_argument(
        "--force", action="store_true", help="sample a queue that has its own RedrivePolicy"
    )
    sample_parser.add_argument("--json", action="store_true", help="print JSON")
    add_connection_arguments(sample_parser)
    sample_parser.set_defaults(func=run_sample)

    redrive = commands.add_parser(
        "redrive",
        help="move parked messages back: dry run, a verified first batch, then the rest",
        description="Move a DLQ's messages back to their source queue: first --first N by hand, verified "
        "(the consumer drained them, none was parked again, the business checks pass), then the rest with "
        "SQS's move task (cancelled if messages are parked again, or on Ctrl-C). --dry-run only counts. "
        "Every run appends an audit record to --audit-file. Exit 0 done, 1 stopped, 2 usage.",
    )
    redrive.add_argument(
        "dlq", metavar="DLQ", help="e.g. payments-payment-requests-dlq or payment-requests-dlq"
    )
    redrive.add_argument(
        "--reason", required=True, help="why (for the audit record): the fix that was deployed"
    )
    redrive.add_argument("--dry-run", action="store_true", help="read every message and count; move nothing")
    redrive.add_argument(
        "--first", type=int, default=5, metavar="N", help="the verified first batch (default 5)"
    )
    redrive.add_argument("--rate", type=int, metavar="M", help="messages per second (move task: 1-500)")
    redrive.add_argument(
        "--filter",
        action="append",
        metavar="KEY=VALUE",
        help="only errorClass=<class> or eventType=<type> (repeat: all must hold); moved one by one",
    )
    redrive.add_argument(
        "--verify-timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="how long the first batch may take to be consumed (default 300)",
    )
    redrive.add_argument(
        "--poll", type=float, default=5.0, metavar="SECONDS", help="progress interval (default 5)"
    )
    redrive.add_argument(
        "--scan-limit",
        type=int,
        default=10_000,
        metavar="N",
        help="at most N messages read by a dry run (default 10000)",
    )
    redrive.add_argument(
        "--audit-file",
        type=Path,
        default=DEFAULT_AUDIT_FILE,
        help=f"JSON-lines audit trail (default {DEFAULT_AUDIT_FILE})",
    )
    redrive.add_argument("--yes", action="store_true", help="do not ask before receiving and moving")
    redrive.add_argument(
        "--force", action="store_true", help="redrive a queue that has its own RedrivePolicy"
    )
    add_connection_arguments(redrive)
    redrive.set_defaults(func=run_redrive)


def run_sample(args: argparse.Namespace) -> int:
    if not 1 <= args.n <= 100:
        raise OpsError("-n takes 1 to 100")
    app = connect(args)
    dlq = app.find_queue(args.dlq, dlq=True)
    check_samplable(dlq, force=args.force)
    # With --json the warning goes to stderr, so stdout stays one JSON document.
    out: Callable[[str], None] = (lambda text: print(text, file=sys.stderr)) if args.json else print
    if not confirm(
        sample_warning(dlq, args.n, visibility=SAMPLE_VISIBILITY_SECONDS), assume_yes=args.yes, out=out
    ):
        out("not sampled")
        return EXIT_STOPPED
    visible, in_flight, _ = depth(app, dlq)
    parked = sample(app, dlq, args.n)
    if args.json:
        print(
            json.dumps(
                {
                    "dlq": dlq.name,
                    "visible": visible,
                    "inFlight": in_flight,
                    "messages": [p.to_json(show_body=args.show_body) for p in parked],
                }
            )
        )
        return EXIT_OK
    print(f"{dlq.name}: {visible} visible, {in_flight} in flight; sampled {len(parked)} (released)")
    for i, p in enumerate(parked, 1):
        for line in describe(p, i, len(parked), show_body=args.show_body, prefix=app.prefix):
            print(line)
    return EXIT_OK


def run_redrive(args: argparse.Namespace) -> int:
    if not args.reason.strip():
        raise OpsError("--reason must say why (it goes into the audit record)")
    if args.first < 1:
        raise OpsError("--first takes N >= 1")
    if args.rate is not None and not 1 <= args.rate <= 500:
        raise OpsError("--rate takes 1 to 500 messages a second (SQS's move task limit)")
    filters = parse_filters(args.filter)
    app = connect(args)
    dlq = app.find_queue(args.dlq, dlq=True)
    check_samplable(dlq, force=args.force)
    options = RedriveOptions(
        reason=args.reason.strip(),
        dry_run=args.dry_run,
        first=args.first,
        rate=args.rate,
        filters=filters,
        verify_timeout=args.verify_timeout,
        poll_seconds=args.poll,
        scan_limit=args.scan_limit,
        audit_file=args.audit_file,
        assume_yes=args.yes,
        force=args.force,
    )
    redrive = Redrive(app, dlq, options)
    if not confirm(redrive_warning(redrive), assume_yes=args.yes):
        print("nothing done")
        return EXIT_STOPPED
    return redrive.run()


def redrive_warning(redrive: Redrive) -> str:
    dlq = redrive.dlq
    visible, in_flight, _ = depth(redrive.app, dlq)
    source = redrive.redrive_source
    to = source.short if source else "each message's relay.sourceQueue"
    options = redrive.options
    if options.dry_run:
        return (
            f"WARNING: a dry run RECEIVES EVERY message of {dlq.name} (~{visible + in_flight}, at most "
            f"{options.scan_limit}) to count them: each one's receive count goes up by one and it is hidden "
            f"for up to {SCAN_VISIBILITY_SECONDS} s while the DLQ is read, then released. Nothing is moved."
        )
    rest = (
        f"then the other matching ones one by one ({_filters_text(options.filters)})"
        if options.filters
        else "then the rest with SQS's move task"
    )
    return (
        f"WARNING: this MOVES messages from {dlq.name} (~{visible + in_flight} there) to {to}: first "
        f"{options.first}, verified, {rest}. Receiving raises receive counts and hides messages while they "
        f"are read. Reason: {options.reason}"
    )
