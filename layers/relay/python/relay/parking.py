"""Park a poison message: copy it to the DLQ with the reason, so the consumer can acknowledge it.

Why not just let the redrive policy do it: a permanent failure would then occupy a worker for
``maxReceiveCount`` receives (each one a visibility timeout long) and arrive in the DLQ with no
reason attached. Parking sends the ORIGINAL body and attributes at once, with the reason as
message attributes that the ops CLI shows and a redrive carries along.

SQS counts message attributes (names, types and values) towards the maximum message size, so a body
near the maximum no longer fits with the reason beside it. When the DLQ refuses the message as too
large, it is parked again with the body intact and only the reason (error class and a short message):
the original attributes are dropped rather than leaving the message to burn receives until the redrive
policy moves it without any reason.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

# SQS allows at most 10 message attributes per message; ours take 6, the original keeps the rest.
MAX_MESSAGE_ATTRIBUTES = 10
ERROR_MESSAGE_LIMIT = 1000
# The reason kept when the full set of attributes makes the message too large for the DLQ.
SHORT_ERROR_MESSAGE_LIMIT = 200
ATTRIBUTE_PREFIX = "relay."


def park(
    record: dict[str, Any],
    error: BaseException,
    *,
    sqs_client: SQSClient,
    dlq_url: str,
    source_queue_url: str,
    now: datetime | None = None,
) -> str | None:
    """Send the record's original body to ``dlq_url`` with the failure reason; returns the parked
    copy's MessageId. Raises if SQS refuses."""
    attributes = record.get("attributes", {}) or {}
    original = record.get("messageAttributes", {}) or {}
    # A message that was redriven and fails again keeps the time of its FIRST failure.
    first_failure = _string_value(original.get("relay.firstFailureAt")) or _iso(now or datetime.now(UTC))
    message = str(error) or type(error).__name__

    ours = {
        "relay.errorClass": type(error).__name__,
        "relay.errorMessage": _shorten(message, ERROR_MESSAGE_LIMIT),
        "relay.firstFailureAt": first_failure,
        "relay.originalMessageId": str(record.get("messageId", "")),
        "relay.receiveCount": str(attributes.get("ApproximateReceiveCount", "1")),
        "relay.sourceQueue": source_queue_url,
    }
    message_attributes: dict[str, dict[str, Any]] = {
        name: {"DataType": "String", "StringValue": value or "-"} for name, value in ours.items()
    }
    # Original attributes in name order until the 10-attribute limit; stale relay.* ones are replaced.
    for name in sorted(original):
        if len(message_attributes) >= MAX_MESSAGE_ATTRIBUTES:
            break
        if name.startswith(ATTRIBUTE_PREFIX):
            continue
        converted = _to_send_format(original[name])
        if converted is not None:
            message_attributes[name] = converted

    params: dict[str, Any] = {
        "QueueUrl": dlq_url,
        "MessageBody": record.get("body", ""),
        "MessageAttributes": message_attributes,
    }
    if dlq_url.endswith(".fifo"):
        # A FIFO DLQ requires a group id; keeping the original group keeps its order for the redrive.
        # Deduplicating on the original messageId makes a re-park (retry after a crash) a no-op.
        params["MessageGroupId"] = attributes.get("MessageGroupId") or "relay-parked"
        params["MessageDeduplicationId"] = str(record.get("messageId", ""))[:128]
    try:
        return _message_id(sqs_client.send_message(**params))
    except Exception as exc:
        if not _too_large(exc):
            raise
        params["MessageAttributes"] = {
            "relay.errorClass": {"DataType": "String", "StringValue": ours["relay.errorClass"]},
            "relay.errorMessage": {
                "DataType": "String",
                "StringValue": _shorten(message, SHORT_ERROR_MESSAGE_LIMIT) or "-",
            },
        }
        return _message_id(sqs_client.send_message(**params))


def _message_id(response: Any) -> str | None:
    return str(response["MessageId"]) if isinstance(response, dict) and response.get("MessageId") else None


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _too_large(exc: Exception) -> bool:
    """SQS's answer to a message over the queue's MaximumMessageSize (body and attributes together)."""
    error = (getattr(exc, "response", None) or {}).get("Error", {}) or {}
    code = str(error.get("Code", ""))
    text = str(error.get("Message", "")).lower()
    return code == "MessageTooLong" or (
        code in ("InvalidParameterValue", "InvalidParameterValueException") and "shorter than" in text
    )


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _string_value(attribute: Any) -> str | None:
    if isinstance(attribute, dict):
        value = attribute.get("stringValue") or attribute.get("StringValue")
        return str(value) if value else None
    return None


def _to_send_format(attribute: Any) -> dict[str, Any] | None:
    """Lambda's record format (camelCase, binary as base64) -> SendMessage format."""
    if not isinstance(attribute, dict):
        return None
    data_type = attribute.get("dataType") or attribute.get("DataType")
    if not data_type:
        return None
    string_value = attribute.get("stringValue", attribute.get("StringValue"))
    if string_value is not None:
        return {"DataType": data_type, "StringValue": str(string_value)}
    binary_value = attribute.get("binaryValue", attribute.get("BinaryValue"))
    if binary_value is not None:
        raw = base64.b64decode(binary_value) if isinstance(binary_value, str) else bytes(binary_value)
        return {"DataType": data_type, "BinaryValue": raw}
    return None
