"""What a parked message says, and reading a DLQ without taking from it: what ``ops dlq sample`` shows
(``ops/dlq.py``) and what a redrive reads, moves and verifies (``ops/redrive.py``).

Reading a DLQ is not free: SQS has no "peek". Every read is a ReceiveMessage, which adds one to the
message's receive count and hides it from every other reader for the visibility timeout. So a ``Reader``
receives with the visibility its caller asks for and gives back what it did not take at once
(ChangeMessageVisibility 0), and a queue with a RedrivePolicy of its own is refused
(``check_samplable``): its higher receive counts would move its messages on.

What a parked message says (``relay.parking``): the attributes ``relay.errorClass``,
``relay.errorMessage``, ``relay.firstFailureAt``, ``relay.originalMessageId``, ``relay.receiveCount``
and ``relay.sourceQueue``; a retry copy carries ``relay.attempt`` and ``relay.lastError``. The body is
the original one: an envelope, or an SNS notification wrapping one (enveloped subscriptions). It is
read with the kernel's unwrap when the kernel is importable, and shown as its field names only
(``body_shape``), never its values (they may hold personal data).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ops.app import App, OpsError, QueueInfo

RECEIVE_WAIT_SECONDS = 1  # long poll: a short poll may answer "empty" while messages exist
STALE_ROUNDS = 3  # receives that bring nothing new before a scan ends
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


@dataclass
class Moved:
    """A parked message sent back to ``destination`` (a queue name), where it is ``new_message_id``."""

    parked: Parked
    destination: str
    new_message_id: str


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


def iso(moment: datetime) -> str:
    """``2025-01-02T03:04:05Z``: UTC, to the second."""
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _iso_ms(epoch_ms: str) -> str | None:
    try:
        return iso(datetime.fromtimestamp(int(epoch_ms) / 1000, UTC))
    except ValueError:
        return None
