"""SQS record -> Envelope, whatever route the message took to the queue.

Routes recognised (in this order):

1. SNS notification (subscription without raw delivery): body is ``{"Type": "Notification",
   "Message": "<envelope JSON>", "TopicArn": ..., "MessageAttributes": ...}``.
2. EventBridge event with an SQS target: ``{"version": "0", "id", "detail-type", "source", "time",
   "detail": ...}``. When ``detail`` is an envelope it is used as-is; otherwise (e.g. the Scheduler's
   ``ScoreSnapshotDue``) an envelope is built deterministically from the EventBridge event id, so
   EventBridge's own retries of one event dedupe to one eventId.
3. SNS raw delivery or a direct SendMessage: the body is the envelope.

The shapes are checked by hand rather than with the Powertools parser models: importing
``aws_lambda_powertools.utilities.parser.models`` builds ~150 pydantic models (~40 ms of cold start
measured here) to read three fields, and the SNS model insists on signature fields a raw test
fixture or an emulator may omit.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from relay import untrusted_json
from relay.envelope import Envelope, build_event_id
from relay.errors import InvalidInput

_ROUTES = "an envelope, an SNS notification wrapping one, or an EventBridge event"


def envelope_from_sqs_record(record: dict[str, Any]) -> Envelope:
    """Unwrap one SQS record (Lambda event format). Raises InvalidInput (permanent) when impossible."""
    message_id = record.get("messageId", "?")
    body = record.get("body")
    if not isinstance(body, str):
        raise InvalidInput(f"SQS message {message_id} has no text body; expected {_ROUTES}.")
    doc = _loads(body, f"SQS message {message_id} body")

    if _is_sns_notification(doc):
        inner = doc["Message"]
        if not isinstance(inner, str):
            raise InvalidInput(f"SQS message {message_id}: SNS notification 'Message' is not a string.")
        inner_doc = _loads(inner, f"SQS message {message_id}: SNS notification Message")
        return _as_envelope(inner_doc, f"SQS message {message_id} (via SNS {doc.get('MessageId', '?')})")

    if _is_eventbridge_event(doc):
        return _from_eventbridge(doc, message_id)

    return _as_envelope(doc, f"SQS message {message_id}")


def _loads(text: str, what: str) -> Any:
    # Not json.loads: nesting 100,000 deep raises RecursionError and 5,000 digits a ValueError, which
    # the consumer would classify as unknown (retried until the redrive) instead of parking at once.
    try:
        return untrusted_json.loads(text, what=what)
    except InvalidInput as exc:
        raise InvalidInput(f"{exc}; expected {_ROUTES}. Parked: fix the producer, then redrive.") from None


def _is_sns_notification(doc: Any) -> bool:
    return (
        isinstance(doc, dict) and doc.get("Type") == "Notification" and "Message" in doc and "TopicArn" in doc
    )


def _is_eventbridge_event(doc: Any) -> bool:
    return (
        isinstance(doc, dict) and "detail-type" in doc and "source" in doc and "detail" in doc and "id" in doc
    )


def _looks_like_envelope(doc: Any) -> bool:
    return isinstance(doc, dict) and "eventId" in doc and "eventType" in doc


def _as_envelope(doc: Any, what: str) -> Envelope:
    if not _looks_like_envelope(doc):
        kind = type(doc).__name__ if not isinstance(doc, dict) else f"object with keys {sorted(doc)[:6]}"
        raise InvalidInput(
            f"{what} is JSON but not a Relay envelope (got {kind}; eventId/eventType missing); "
            f"expected {_ROUTES}. Parked: fix the producer, then redrive."
        )
    try:
        return Envelope.from_dict(doc)
    except InvalidInput as exc:
        raise InvalidInput(f"{what}: {exc}") from exc


def _from_eventbridge(doc: dict[str, Any], message_id: str) -> Envelope:
    detail = doc["detail"]
    what = f"SQS message {message_id} (EventBridge event {doc.get('id')})"
    if _looks_like_envelope(detail):
        return _as_envelope(detail, what)
    if not isinstance(detail, dict):
        raise InvalidInput(f"{what}: 'detail' is {type(detail).__name__}, expected an object.")
    detail_type = str(doc["detail-type"])
    time_text = doc.get("time")
    try:
        occurred_at = datetime.fromisoformat(str(time_text).replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidInput(f"{what}: 'time' {time_text!r} is not an ISO-8601 timestamp.") from exc
    return Envelope.from_dict(
        {
            "eventId": build_event_id(detail_type, str(doc["source"]), str(doc["id"])),
            "eventType": detail_type,
            "eventVersion": "1.0",
            "occurredAt": occurred_at,
            "correlationId": str(doc["id"]),
            "ids": {"eventBridgeEventId": str(doc["id"]), "source": str(doc["source"])},
            "payload": detail,
        }
    )
