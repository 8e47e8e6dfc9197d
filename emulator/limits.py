"""Request limits and validation rules AWS enforces and moto 5.2.5 does not: the emulator refuses them too.

A request the emulator accepts and AWS refuses is a bug that shows up only after a deploy. For the APIs
an app's functions call, this module checks what moto lets through, before moto's own handler runs,
and answers with AWS's error code and message. What moto already checks (SQS's 1 MiB body and its
batch rules on SendMessageBatch, SNS's 256 KB message and 10-entry batch, DynamoDB's 400 KB item, key
sizes, empty keys, 100-action transactions and 100-key BatchGetItem, PutEvents' 10 entries and
malformed Detail) is left to moto; ``tests/sandbox/test_limits.py`` asserts both sides of each rule
here (moto alone accepts, the emulator refuses). The fidelity table in ``docs/sandbox.md`` lists the
rules neither enforces.

Sources (read 2026-12-05):
- SQS SendMessage: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html
  (body of 1 character to 1 MiB, the allowed characters, InvalidMessageContents);
  message attributes: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-message-metadata.html
  (at most 10; names up to 256 characters of A-Z a-z 0-9 _ - ., no AWS./Amazon. prefix, no leading,
  trailing or doubled period; name, type and value not empty; part of the message size);
  DeleteMessageBatch / ChangeMessageVisibilityBatch: at most 10 entries, ids of up to 80
  alphanumerics, hyphens and underscores, distinct.
- SNS PublishBatch: https://docs.aws.amazon.com/sns/latest/api/API_PublishBatch.html (the batch's
  messages together at most 256 KB; entry ids as SQS's). Publish: a message may not be empty.
- DynamoDB: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html
  (an expression at most 4 KB; a number at most 38 significant digits; BatchWriteItem at most 25
  requests); an ExpressionAttributeValues entry no expression uses is a ValidationException (moto
  refuses an unused ExpressionAttributeNames entry itself; checked here too, for transactions).
- EventBridge PutEvents: https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevent-size.html
  (the entries of one request together under 256 KB, sized as the page says).
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

SQS_ATTRIBUTE_LIMIT = 10
SNS_BATCH_LIMIT_BYTES = 256 * 1024
PUT_EVENTS_LIMIT_BYTES = 256 * 1024
EXPRESSION_LIMIT_BYTES = 4 * 1024
BATCH_WRITE_LIMIT = 25
NUMBER_DIGITS = 38

# XML 1.0's characters: what an SQS body and a String attribute may hold.
_INVALID_CHARACTER = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_ATTRIBUTE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,256}")
_BATCH_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")
_EXPRESSIONS = (
    "ConditionExpression",
    "UpdateExpression",
    "KeyConditionExpression",
    "FilterExpression",
    "ProjectionExpression",
)


# -- SQS -----------------------------------------------------------------------------------------------


def _sqs_error(code: str, message: str) -> Exception:
    from moto.sqs.exceptions import SQSException

    return SQSException(code, message)


def _sqs_body(body: Any) -> None:
    from moto.sqs.exceptions import MissingParameter

    if body is None or body == "":
        raise MissingParameter("MessageBody")
    if _INVALID_CHARACTER.search(str(body)):
        raise _sqs_error(
            "InvalidMessageContents",
            "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | "
            "#xE000 to #xFFFD | #x10000 to #x10FFFF",
        )


def _sqs_attributes(attributes: Mapping[str, Any] | None) -> int:
    """Check the message attributes as SQS does; returns their size in bytes (name, type and value)."""
    from moto.sqs.exceptions import InvalidParameterValue

    attributes = attributes or {}
    if len(attributes) > SQS_ATTRIBUTE_LIMIT:
        raise InvalidParameterValue(
            f"Number of message attributes [{len(attributes)}] exceeds the allowed maximum "
            f"[{SQS_ATTRIBUTE_LIMIT}]."
        )
    size = 0
    for name, value in attributes.items():
        lowered = name.lower()
        if (
            not _ATTRIBUTE_NAME.fullmatch(name)
            or lowered.startswith(("aws.", "amazon."))
            or name.startswith(".")
            or name.endswith(".")
            or ".." in name
        ):
            raise InvalidParameterValue(
                f"Message (user) attribute name '{name}' is invalid. The attribute name can contain A-Z, "
                "a-z, 0-9, underscore (_), hyphen (-), and period (.) characters, at most 256 of them; "
                "it cannot start with AWS. or Amazon., start or end with a period, or hold two in a row."
            )
        data_type = str(value.get("DataType") or "")
        text = value.get("StringValue")
        binary = value.get("BinaryValue")
        if data_type.startswith(("String", "Number")):
            if text is None or text == "":
                raise InvalidParameterValue(
                    f"Message (user) attribute '{name}' must contain a non-empty value of type '{data_type}'."
                )
            if _INVALID_CHARACTER.search(str(text)):
                raise _sqs_error(
                    "InvalidMessageContents", f"Message (user) attribute '{name}' holds invalid characters."
                )
            size += len(str(text).encode())
        elif binary is not None:
            size += len(binary) if isinstance(binary, bytes | bytearray) else len(str(binary))
        size += len(name.encode()) + len(data_type.encode())
    return size


def _sqs_batch(entries: list[Any], action: str) -> None:
    from moto.sqs.exceptions import (
        BatchEntryIdsNotDistinct,
        EmptyBatchRequest,
        InvalidBatchEntryId,
        TooManyEntriesInBatchRequest,
    )

    if not entries:
        raise EmptyBatchRequest(action=action)
    if len(entries) > 10:
        raise TooManyEntriesInBatchRequest(len(entries))
    seen: set[str] = set()
    for entry in entries:
        entry_id = str(entry.get("Id", ""))
        if not _BATCH_ID.fullmatch(entry_id):
            raise InvalidBatchEntryId()
        if entry_id in seen:
            raise BatchEntryIdsNotDistinct(entry_id)
        seen.add(entry_id)


def _maximum_size(response: Any) -> int:
    queue = response.sqs_backend.get_queue(response._get_queue_name())
    return int(queue.maximum_message_size)


def _sqs_send_message(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def send_message(self: Any) -> Any:
        from moto.sqs.exceptions import InvalidParameterValue

        body = self._get_param("MessageBody")
        _sqs_body(body)
        size = len(str(body).encode()) + _sqs_attributes(self._get_param("MessageAttributes"))
        if size > (limit := _maximum_size(self)):
            raise InvalidParameterValue(
                f"One or more parameters are invalid. Reason: Message must be shorter than {limit} bytes."
            )
        return original(self)

    return send_message


def _sqs_send_message_batch(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def send_message_batch(self: Any) -> Any:
        from moto.sqs.exceptions import BatchRequestTooLong

        entries = self._get_param("Entries", [])
        _sqs_batch(entries, "Send")
        total = 0
        for entry in entries:
            _sqs_body(entry.get("MessageBody"))
            total += len(str(entry.get("MessageBody")).encode()) + _sqs_attributes(
                entry.get("MessageAttributes")
            )
        if total > _maximum_size(self):
            raise BatchRequestTooLong(total)
        return original(self)

    return send_message_batch


def _sqs_entries(action: str, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def batch(self: Any) -> Any:
        _sqs_batch(self._get_param("Entries", []), action)
        return original(self)

    return batch


# -- SNS -----------------------------------------------------------------------------------------------


def _sns_publish(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def publish(self: Any) -> Any:
        from moto.sns.exceptions import SNSInvalidParameter

        if not self._get_param("Message"):
            raise SNSInvalidParameter("Invalid parameter: Empty message")
        return original(self)

    return publish


def _sns_publish_batch(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def publish_batch(self: Any) -> Any:
        from moto.sns.exceptions import SNSException

        entries = self._get_param("PublishBatchRequestEntries", [])
        if not entries:
            raise SNSException("EmptyBatchRequest", "The batch request doesn't contain any entries.")
        for entry in entries:
            if not _BATCH_ID.fullmatch(str(entry.get("Id", ""))):
                raise SNSException(
                    "InvalidBatchEntryId",
                    "The Id of a batch entry in a batch request doesn't abide by the specification.",
                )
        total = sum(len(str(entry.get("Message", "")).encode()) for entry in entries)
        if total > SNS_BATCH_LIMIT_BYTES:
            raise SNSException(
                "BatchRequestTooLong",
                f"The length of all the messages put together is more than the limit "
                f"({total} > {SNS_BATCH_LIMIT_BYTES} bytes).",
            )
        return original(self)

    return publish_batch


# -- DynamoDB ------------------------------------------------------------------------------------------


def _numbers(value: Any) -> Iterable[str]:
    if isinstance(value, Mapping):
        for kind, inner in value.items():
            if kind == "N":
                yield str(inner)
            elif kind == "NS":
                yield from (str(n) for n in inner)
            elif kind in ("M", "L"):
                yield from _numbers(inner)
            elif isinstance(inner, Mapping | list):
                yield from _numbers(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _numbers(inner)


def _significant_digits(number: str) -> int:
    mantissa = re.sub(r"[eE].*$", "", number.strip().lstrip("+-")).replace(".", "")
    return len(mantissa.strip("0")) or 1


def _validation(message: str) -> Exception:
    from moto.dynamodb.exceptions import MockValidationException

    return MockValidationException(message)


def _check_operation(params: Mapping[str, Any]) -> None:
    """The rules one DynamoDB operation (or one action of a transaction) is held to."""
    used = ""
    for name in _EXPRESSIONS:
        expression = params.get(name)
        if expression is None:
            continue
        if len(str(expression).encode()) > EXPRESSION_LIMIT_BYTES:
            raise _validation(
                f"Invalid {name}: Expression size has exceeded the maximum allowed size; "
                f"expression size: {len(str(expression).encode())}"
            )
        used += " " + str(expression)
    values = params.get("ExpressionAttributeValues") or {}
    names = params.get("ExpressionAttributeNames") or {}
    tokens = set(re.findall(r"[:#][A-Za-z0-9_]+", used))
    unused_values = sorted(v for v in values if v not in tokens)
    if unused_values:
        raise _validation(
            "Value provided in ExpressionAttributeValues unused in expressions: keys: {"
            + ", ".join(unused_values)
            + "}"
        )
    unused_names = sorted(n for n in names if n not in tokens)
    if unused_names:
        raise _validation(
            "Value provided in ExpressionAttributeNames unused in expressions: keys: {"
            + ", ".join(unused_names)
            + "}"
        )
    for number in _numbers([params.get("Item"), params.get("Key"), values]):
        if _significant_digits(number) > NUMBER_DIGITS:
            raise _validation("Attempting to store more than 38 significant digits in a Number")


def _dynamodb_call_action(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def call_action(self: Any) -> Any:
        params = getattr(self, "params", None) or {}
        action = str(getattr(self, "_get_action", lambda: "")() or "")
        if action in {"PutItem", "UpdateItem", "DeleteItem", "GetItem", "Query", "Scan"}:
            _check_operation(params)
        elif action == "TransactWriteItems":
            for entry in params.get("TransactItems") or []:
                for operation in entry.values():
                    _check_operation(operation)
        elif action == "BatchWriteItem":
            count = sum(len(requests) for requests in (params.get("RequestItems") or {}).values())
            if count > BATCH_WRITE_LIMIT:
                raise _validation(
                    "1 validation error detected: Value at 'requestItems' failed to satisfy constraint: "
                    f"Member must have length less than or equal to {BATCH_WRITE_LIMIT}"
                )
            for requests in (params.get("RequestItems") or {}).values():
                for request in requests:
                    for operation in request.values():
                        _check_operation(operation)
        return original(self)

    return call_action


# -- EventBridge ---------------------------------------------------------------------------------------


def _entry_size(entry: Mapping[str, Any]) -> int:
    """PutEvents' entry size, as EventBridge computes it (eb-putevent-size.html)."""
    size = 14 if entry.get("Time") is not None else 0
    for name in ("Source", "DetailType", "Detail"):
        if entry.get(name) is not None:
            size += len(str(entry[name]).encode())
    return size + sum(len(str(r).encode()) for r in entry.get("Resources") or [])


def _events_put_events(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def put_events(self: Any) -> Any:
        from moto.events.exceptions import ValidationException

        total = sum(_entry_size(e) for e in self._get_param("Entries") or [])
        if total >= PUT_EVENTS_LIMIT_BYTES:
            raise ValidationException("Total size of the entries in the request is over the limit.")
        return original(self)

    return put_events


# -- install -------------------------------------------------------------------------------------------


def _owners() -> list[type]:
    from moto.dynamodb.responses import DynamoHandler
    from moto.events.responses import EventsHandler
    from moto.sns.responses import SNSResponse
    from moto.sqs.responses import SQSResponse

    return [SQSResponse, SNSResponse, DynamoHandler, EventsHandler]


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    """Within the block, moto answers as it does alone (a test shows both sides of a rule)."""
    swapped = [
        (owner, name, method)
        for owner in _owners()
        for name, method in list(vars(owner).items())
        if getattr(method, "_emulator_limits", False)
    ]
    for owner, name, method in swapped:
        setattr(owner, name, method.__wrapped__)
    try:
        yield
    finally:
        for owner, name, method in swapped:
            setattr(owner, name, method)


def install() -> Callable[[], None]:
    """Enforce the limits in this process's moto (the emulator's server, or a test's ``mock_aws``);
    returns a function that removes them. Installing twice is a no-op."""
    from moto.dynamodb.responses import DynamoHandler
    from moto.events.responses import EventsHandler
    from moto.sns.responses import SNSResponse
    from moto.sqs.responses import SQSResponse

    wrappers: list[tuple[type, str, Callable[[Callable[..., Any]], Callable[..., Any]]]] = [
        (SQSResponse, "send_message", _sqs_send_message),
        (SQSResponse, "send_message_batch", _sqs_send_message_batch),
        (SQSResponse, "delete_message_batch", functools.partial(_sqs_entries, "Delete")),
        (
            SQSResponse,
            "change_message_visibility_batch",
            functools.partial(_sqs_entries, "ChangeMessageVisibility"),
        ),
        (SNSResponse, "publish", _sns_publish),
        (SNSResponse, "publish_batch", _sns_publish_batch),
        (DynamoHandler, "call_action", _dynamodb_call_action),
        (EventsHandler, "put_events", _events_put_events),
    ]
    saved = []
    for owner, name, wrap in wrappers:
        current = getattr(owner, name)
        if getattr(current, "_emulator_limits", False):
            continue
        wrapped = wrap(current)
        wrapped._emulator_limits = True  # type: ignore[attr-defined]
        saved.append((owner, name, current))
        setattr(owner, name, wrapped)

    def remove() -> None:
        for owner, name, original in saved:
            setattr(owner, name, original)

    return remove
