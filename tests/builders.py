"""Small builders for Lambda events, so tests read as specifications instead of JSON blobs.

    sqs_event(records=[sqs_record(sns_wrapped(envelope)), sqs_record(envelope_json(envelope))])
    sqs_event(records=[fifo_record(body, group_id="op-1") for body in bodies])
    ddb_stream_event(records=[ddb_stream_record("INSERT", keys={...}, new_image={...})])

Bodies may be given as a str (used verbatim), an Envelope or a dict (JSON-encoded).
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from relay.envelope import Envelope, new_envelope

REGION = "us-east-1"
ACCOUNT = "123456789012"
_sequence = itertools.count(1)


def queue_arn(name: str = "relay-queue") -> str:
    return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"


def _text(body: str | Envelope | Mapping[str, Any]) -> str:
    if isinstance(body, str):
        return body
    if isinstance(body, Envelope):
        return body.to_json()
    return json.dumps(body)


def envelope(
    event_type: str = "PaymentRequested",
    *,
    identity: Iterable[str] | None = None,
    ids: Mapping[str, str] | None = None,
    payload: Mapping[str, Any] | None = None,
    correlation_id: str = "corr-1",
    event_version: str = "1.0",
    **extra: Any,
) -> Envelope:
    """A valid envelope with sensible defaults (identity defaults to a fresh operation id)."""
    operation_id = (ids or {}).get("operationId") or f"op-{uuid.uuid4().hex[:8]}"
    return new_envelope(
        event_type,
        identity=list(identity) if identity is not None else [operation_id],
        ids=dict(ids) if ids is not None else {"operationId": operation_id},
        payload=dict(payload) if payload is not None else ({} if "claim_check" not in extra else None),
        correlation_id=correlation_id,
        event_version=event_version,
        **extra,
    )


def sqs_record(
    body: str | Envelope | Mapping[str, Any],
    *,
    message_id: str | None = None,
    receipt_handle: str | None = None,
    receive_count: int = 1,
    queue: str = "relay-queue",
    message_attributes: Mapping[str, Any] | None = None,
    first_received_ms: int | None = None,
    attributes: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One record of an SQS event, in the Lambda event format."""
    now_ms = int(time.time() * 1000)
    message_id = message_id or str(uuid.uuid4())
    record_attributes = {
        "ApproximateReceiveCount": str(receive_count),
        "SentTimestamp": str(now_ms - 1000),
        "SenderId": "AIDAEXAMPLE",
        "ApproximateFirstReceiveTimestamp": str(first_received_ms or now_ms),
    }
    record_attributes.update(attributes or {})
    return {
        "messageId": message_id,
        "receiptHandle": receipt_handle or f"rh-{message_id}",
        "body": _text(body),
        "attributes": record_attributes,
        "messageAttributes": dict(message_attributes or {}),
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn(queue),
        "awsRegion": REGION,
    }


def fifo_record(
    body: str | Envelope | Mapping[str, Any],
    *,
    group_id: str = "group-1",
    queue: str = "relay-queue.fifo",
    deduplication_id: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """A record from a FIFO queue (MessageGroupId and sequence number attributes set)."""
    extra = {
        "MessageGroupId": group_id,
        "MessageDeduplicationId": deduplication_id or str(uuid.uuid4()),
        "SequenceNumber": str(next(_sequence)).zfill(20),
    }
    extra.update(kwargs.pop("attributes", {}) or {})
    return sqs_record(body, queue=queue, attributes=extra, **kwargs)


def sqs_event(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    return {"Records": list(records)}


def string_attribute(value: str) -> dict[str, Any]:
    """A message attribute as Lambda shows it in an SQS record."""
    return {"stringValue": value, "stringListValues": [], "binaryListValues": [], "dataType": "String"}


def number_attribute(value: str) -> dict[str, Any]:
    """A Number message attribute as Lambda shows it in an SQS record (e.g. ``relay.attempt``)."""
    return {"stringValue": value, "stringListValues": [], "binaryListValues": [], "dataType": "Number"}


def binary_attribute(value: bytes) -> dict[str, Any]:
    return {
        "binaryValue": base64.b64encode(value).decode(),
        "stringListValues": [],
        "binaryListValues": [],
        "dataType": "Binary",
    }


def sns_wrapped(
    body: str | Envelope | Mapping[str, Any],
    *,
    topic: str = "payment-events",
    message_attributes: Mapping[str, str] | None = None,
) -> str:
    """The SQS body SNS delivers WITHOUT raw message delivery: a notification wrapping the message."""
    inner = _text(body)
    attributes = dict(message_attributes or {})
    if isinstance(body, Envelope):
        attributes.setdefault("eventType", body.event_type)
    return json.dumps(
        {
            "Type": "Notification",
            "MessageId": str(uuid.uuid4()),
            "TopicArn": f"arn:aws:sns:{REGION}:{ACCOUNT}:{topic}",
            "Message": inner,
            "Timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "SignatureVersion": "1",
            "Signature": "EXAMPLE",
            "SigningCertURL": "https://sns.us-east-1.amazonaws.com/cert.pem",
            "UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe",
            "MessageAttributes": {k: {"Type": "String", "Value": v} for k, v in attributes.items()},
        }
    )


def eventbridge_wrapped(
    detail: Envelope | Mapping[str, Any],
    *,
    detail_type: str = "ScoreSnapshotDue",
    source: str = "relay.scheduler",
    event_id: str | None = None,
    time_: str = "2024-05-01T10:00:00Z",
) -> str:
    """The SQS body of an EventBridge event delivered by a rule's SQS target."""
    detail_obj = json.loads(detail.to_json()) if isinstance(detail, Envelope) else dict(detail)
    return json.dumps(
        {
            "version": "0",
            "id": event_id or str(uuid.uuid4()),
            "detail-type": detail_type,
            "source": source,
            "account": ACCOUNT,
            "time": time_,
            "region": REGION,
            "resources": [],
            "detail": detail_obj,
        }
    )


def ddb_stream_record(
    event_name: str,
    *,
    keys: Mapping[str, Any],
    new_image: Mapping[str, Any] | None = None,
    old_image: Mapping[str, Any] | None = None,
    table: str = "relay-table",
    sequence_number: str | None = None,
) -> dict[str, Any]:
    """One DynamoDB stream record; keys/images are in DynamoDB JSON (``{"pk": {"S": "..."}}``)."""
    stream: dict[str, Any] = {
        "ApproximateCreationDateTime": time.time(),
        "Keys": dict(keys),
        "SequenceNumber": sequence_number or str(next(_sequence)).zfill(21),
        "SizeBytes": 100,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    if new_image is not None:
        stream["NewImage"] = dict(new_image)
    if old_image is not None:
        stream["OldImage"] = dict(old_image)
    return {
        "eventID": uuid.uuid4().hex,
        "eventName": event_name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": REGION,
        "dynamodb": stream,
        "eventSourceARN": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}/stream/2024-01-01T00:00:00.000",
    }


def ddb_stream_event(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    return {"Records": list(records)}


def item_insert(
    env: Envelope,
    *,
    keys: Mapping[str, Any] | None = None,
    table: str = "relay-table",
    sequence_number: str | None = None,
) -> dict[str, Any]:
    """The stream record DynamoDB emits when an entity item holding ``env`` (its ``ev``, as one write
    per step writes it) is inserted: what the stream publisher publishes."""
    from relay.entity_events import EVENTS_ATTRIBUTE, compact

    key = dict(keys or {"pk": {"S": f"ENTITY#{env.event_id}"}, "sk": {"S": "ENTITY"}})
    image = {**key, EVENTS_ATTRIBUTE: {"L": [{"S": compact(env)}]}}
    return ddb_stream_record(
        "INSERT", keys=key, new_image=image, table=table, sequence_number=sequence_number
    )


class FakeContext:
    """Minimal Lambda context for tests."""

    function_name = "relay-test"
    memory_limit_in_mb = 256
    invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:relay-test"
    aws_request_id = "req-1"

    def get_remaining_time_in_millis(self) -> int:
        return 300_000


def record_from_received(message: Mapping[str, Any], queue_arn_: str) -> dict[str, Any]:
    """Turn a ReceiveMessage result (AttributeNames/MessageAttributeNames=All) into the record Lambda's
    SQS event source would deliver -- so handler tests can run on real (moto) queues."""
    attributes = {k: str(v) for k, v in (message.get("Attributes") or {}).items()}
    message_attributes: dict[str, Any] = {}
    for name, value in (message.get("MessageAttributes") or {}).items():
        if "StringValue" in value:
            message_attributes[name] = {"stringValue": value["StringValue"], "dataType": value["DataType"]}
        else:
            raw = value.get("BinaryValue", b"")
            message_attributes[name] = {
                "binaryValue": base64.b64encode(raw).decode(),
                "dataType": value["DataType"],
            }
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": attributes,
        "messageAttributes": message_attributes,
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn_,
        "awsRegion": REGION,
    }


def retry_copy(
    sqs_client: Any,
    queue_url: str,
    *,
    attempt: int = 1,
    body: str | None = None,
    within: float = 5.0,
) -> dict[str, Any]:
    """The ONE delayed copy ``relay.consumer`` re-sent to ``queue_url`` to retry a transient failure,
    as ReceiveMessage returns it (all attributes), asserted to be retry ``attempt`` of its chain (and a
    byte-for-byte copy of ``body`` when given). Waits up to ``within`` seconds for it: the copy is sent
    with DelaySeconds, which moto honours. Redeliver it with ``record_from_received``, as Lambda would."""
    deadline = time.monotonic() + within
    messages: list[dict[str, Any]] = []
    while not messages and time.monotonic() < deadline:
        messages = _receive_all(sqs_client, queue_url, wait=1)
    assert len(messages) == 1, f"expected exactly one retry copy on {queue_url}, found {len(messages)}"
    (copy,) = messages
    attributes = copy.get("MessageAttributes") or {}
    assert attributes.get("relay.attempt") == {"DataType": "Number", "StringValue": str(attempt)}, attributes
    assert {"relay.firstFailureAt", "relay.lastError"} <= set(attributes), attributes
    if body is not None:
        assert copy["Body"] == body, "a retry copy carries the original body byte for byte"
    return copy


def _receive_all(sqs_client: Any, queue_url: str, *, wait: int = 0) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    while batch := sqs_client.receive_message(
        QueueUrl=queue_url,
        MaxNumberOfMessages=10,
        WaitTimeSeconds=0 if messages else wait,
        VisibilityTimeout=30,
        AttributeNames=["All"],
        MessageAttributeNames=["All"],
    ).get("Messages", []):
        messages.extend(batch)
    return messages


def failed_ids(response: Mapping[str, Any]) -> list[str]:
    """The message ids a partial batch response reports failed."""
    return [f["itemIdentifier"] for f in response.get("batchItemFailures", [])]


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` in ``os.environ`` within the block (a function's environment), restored after."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
