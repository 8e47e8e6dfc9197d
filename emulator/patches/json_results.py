"""DynamoDB's and SQS's data-plane results written as JSON directly, not through moto's serializer
(patch 6).

moto's behaviour: moto 5.2 writes every response through a model-driven serializer
(``ActionResult.execute_result`` in moto/core/responses.py, ``ResponseSerializer.serialize`` in
moto/core/serialize.py) that walks the botocore output shape value by value. For DynamoDB that was most
of the emulator's CPU: a GetItem 8 ms of 10, a 200-record GetRecords 650 ms. With DynamoDB on this path,
the serializer was still ~10 % of the emulator's CPU in a chaos run (py-spy, 2026-12-07), nearly all of
it SQS's: a ReceiveMessage of 10 messages 1.6 ms, a SendMessageBatch of 10 0.8 ms.

AWS's behaviour: performance only: AWS's behaviour is unchanged. DynamoDB's and SQS's data-plane results
are already the wire JSON (moto builds them as AttributeValue dicts, and SQS's as the wire's message
and entry dicts), so for those operations
(``FAST_JSON_OPERATIONS``) the result is dumped as JSON directly, with the serializer's own rules for the
two non-JSON types (bytes -> base64, datetimes -> epoch seconds truncated to milliseconds) and only the
output shape's top-level members. The status, the Content-Type and the body are what the serializer
answers (tests/sandbox/patches/test_json_results.py compares them response by response); errors and
control-plane operations (DescribeTable) keep the serializer.

Upstream: no. It special-cases two services around moto's serializer and relies on moto building those
results in wire form; the fix moto would want is a faster serializer for every service.

Patches: moto 5.2.5, ``ActionResult.execute_result``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PATCHES = {"moto": "5.2.5"}

# The operations whose results are wire-format JSON already; control-plane operations such as
# DescribeTable return model objects and keep the serializer.
FAST_JSON_OPERATIONS = frozenset(
    [
        ("dynamodb", op)
        for op in (
            "GetItem",
            "PutItem",
            "UpdateItem",
            "DeleteItem",
            "Query",
            "Scan",
            "BatchGetItem",
            "BatchWriteItem",
            "TransactGetItems",
            "TransactWriteItems",
        )
    ]
    + [("dynamodbstreams", "GetRecords"), ("dynamodbstreams", "GetShardIterator")]
    + [
        ("sqs", op)
        for op in (
            "ReceiveMessage",
            "SendMessage",
            "SendMessageBatch",
            "DeleteMessageBatch",
            "ChangeMessageVisibilityBatch",
            "GetQueueAttributes",
            "GetQueueUrl",
        )
    ]
)
# Services whose results carry None below the top level (SQS: a standard queue's SequenceNumber), which
# the serializer leaves out at every level. DynamoDB's never do (a null is {"NULL": true}).
_NESTED_NONE_SERVICES = frozenset(["sqs"])
# Set by the equivalence test: every fast response is also serialized the slow way and compared.
VERIFY_FAST_JSON: list[tuple[str, str, Any, Any]] | None = None


def _json_default(value: Any) -> Any:
    import base64
    import calendar
    from datetime import datetime

    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime):
        seconds = calendar.timegm(value.timetuple())
        return seconds + (value.microsecond // 1000) / 1000.0 if value.microsecond else seconds
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


def install() -> Callable[[], None]:
    """Install patch 6; returns a function that removes it."""
    import json

    from moto.core.responses import ActionResult

    original = ActionResult.execute_result

    def execute_result(self: Any, context: Any) -> Any:
        key = (context.service_model.service_name, context.operation_model.name)
        result = self.result
        if key not in FAST_JSON_OPERATIONS or not isinstance(result, dict):  # errors keep the serializer
            return original(self, context)
        # Like the serializer, answer only the output shape's members (moto adds a few legacy keys).
        members = context.operation_model.output_shape.members
        wire = {k: v for k, v in result.items() if k in members and v is not None}
        if key[0] in _NESTED_NONE_SERVICES:
            wire = _without_none(wire)
        body = json.dumps(wire, default=_json_default, separators=(",", ":"))
        headers = {"Content-Type": f"application/x-amz-json-{context.service_model.metadata['jsonVersion']}"}
        if VERIFY_FAST_JSON is not None:
            VERIFY_FAST_JSON.append((*key, (200, dict(headers), json.loads(body)), original(self, context)))
        return 200, headers, body

    ActionResult.execute_result = execute_result  # type: ignore[method-assign]

    def remove() -> None:
        ActionResult.execute_result = original  # type: ignore[method-assign]

    return remove
