"""DynamoDB marshalling and the write builders every store uses.

* ``serialize_item`` / ``deserialize_item``: plain Python values <-> DynamoDB JSON (floats become
  Decimal: DynamoDB has no binary floats);
* ``put`` / ``update`` / ``delete`` / ``condition_check``: one ``BusinessWrite`` (a TransactItem in
  DynamoDB JSON) with, optionally, how its failed condition is explained (``on_condition_failed``,
  given the item as it was: ``ReturnValuesOnConditionCheckFailure=ALL_OLD`` is always asked for);
* ``apply_write``: ONE write as a plain conditional Put/Update/DeleteItem; ``apply_writes``: several in
  ONE ``TransactWriteItems`` without a processed-event marker (``relay.idempotency.commit_once`` adds
  the marker).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from relay.errors import classify

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

OnConditionFailed = Callable[[dict[str, Any] | None], Exception]


@dataclass(frozen=True)
class BusinessWrite:
    """One low-level TransactItem (``{"Put": {...}}``, ``Update``, ``Delete`` or ``ConditionCheck``,
    in DynamoDB JSON) and, optionally, how to turn its failed condition into the caller's error.

    ``on_condition_failed`` receives the item as it was (ALL_OLD, plain Python values) or None.
    """

    transact_item: Mapping[str, Any]
    on_condition_failed: Callable[[dict[str, Any] | None], Exception] | None = None

    @property
    def operation(self) -> str:
        return next(iter(self.transact_item))

    @property
    def body(self) -> Mapping[str, Any]:
        body: Mapping[str, Any] = self.transact_item[self.operation]
        return body


def apply_writes(writes: Sequence[BusinessWrite], *, ddb_client: DynamoDBClient) -> None:
    """The business writes in ONE ``TransactWriteItems`` WITHOUT a processed-event marker (an API
    request, not an event: its own idempotency is elsewhere). A write whose condition failed raises
    its own explanation (``on_condition_failed(old_item)``); anything else is classified by
    ``relay.errors.classify``."""
    try:
        ddb_client.transact_write_items(
            TransactItems=cast("list[TransactWriteItemTypeDef]", [dict(w.transact_item) for w in writes])
        )
    except Exception as exc:
        reasons = (getattr(exc, "response", {}) or {}).get("CancellationReasons") or []
        for write, reason in zip(writes, reasons, strict=False):
            if reason.get("Code") == "ConditionalCheckFailed" and write.on_condition_failed is not None:
                old = deserialize_item(reason["Item"]) if reason.get("Item") else None
                raise write.on_condition_failed(old) from exc
        raise classify(exc) from exc


_SINGLE_ITEM_CALLS = {"Put": "put_item", "Update": "update_item", "Delete": "delete_item"}


def apply_write(write: BusinessWrite, *, ddb_client: DynamoDBClient) -> None:
    """ONE business write as a plain conditional PutItem / UpdateItem / DeleteItem, not a transaction:
    one item is atomic by itself, and a transaction bills each item's write units twice.

    The difference a caller must handle: botocore retries a request whose reply was lost, and a
    transaction's retry carries the same ``ClientRequestToken``, so DynamoDB answers it with success; a
    plain write's retry after it committed fails its own condition instead. ``on_condition_failed``
    then receives the item AS THIS WRITE LEFT IT and must explain that as already applied
    (``relay.state_machine.AlreadyApplied``), not as a conflict. A ``ConditionCheck`` has no
    single-item call: it goes through ``apply_writes``."""
    call = _SINGLE_ITEM_CALLS.get(write.operation)
    if call is None:
        apply_writes([write], ddb_client=ddb_client)
        return
    try:
        getattr(ddb_client, call)(**with_all_old(write.transact_item)[write.operation])
    except Exception as exc:
        if error_code(exc) == "ConditionalCheckFailedException" and write.on_condition_failed is not None:
            item = (getattr(exc, "response", {}) or {}).get("Item")
            raise write.on_condition_failed(deserialize_item(item) if item else None) from exc
        raise classify(exc) from exc


def error_code(exc: Exception) -> str | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return str(code) if code is not None else None
    return None


def with_all_old(transact_item: Mapping[str, Any]) -> dict[str, Any]:
    """Ask for the current item whenever a write has a condition, so its failure can be explained."""
    operation, body = next(iter(transact_item.items()))
    body = dict(body)
    if "ConditionExpression" in body:
        body.setdefault("ReturnValuesOnConditionCheckFailure", "ALL_OLD")
    return {operation: body}


def serialize_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """Plain Python values -> DynamoDB JSON. Floats become Decimal (DynamoDB has no binary floats)."""
    return {k: serialize_value(v) for k, v in item.items()}


def serialize_value(value: Any) -> dict[str, Any]:
    # Fast path for the common scalars (the per-record hot path); TypeSerializer for the rest.
    kind = type(value)
    if kind is str:
        return {"S": value}
    if kind is int:
        return {"N": str(value)}
    if kind is bool:
        return {"BOOL": value}
    return dict(_serializer.serialize(_decimalize(value)))


def deserialize_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _deserializer.deserialize(v) for k, v in item.items()}


def _decimalize(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, Mapping):
        return {k: _decimalize(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_decimalize(v) for v in value]
    return value


def _expression_parts(
    condition: str | None, names: Mapping[str, str] | None, values: Mapping[str, Any] | None
) -> dict[str, Any]:
    parts: dict[str, Any] = {}
    if condition:
        parts["ConditionExpression"] = condition
        parts["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    if names:
        parts["ExpressionAttributeNames"] = dict(names)
    if values:
        parts["ExpressionAttributeValues"] = serialize_item(values)
    return parts


def put(
    table_name: str,
    item: Mapping[str, Any],
    condition: str | None = None,
    names: Mapping[str, str] | None = None,
    values: Mapping[str, Any] | None = None,
    *,
    on_condition_failed: OnConditionFailed | None = None,
) -> BusinessWrite:
    body = {
        "TableName": table_name,
        "Item": serialize_item(item),
        **_expression_parts(condition, names, values),
    }
    return BusinessWrite({"Put": body}, on_condition_failed)


def update(
    table_name: str,
    key: Mapping[str, Any],
    update_expression: str,
    condition: str | None = None,
    names: Mapping[str, str] | None = None,
    values: Mapping[str, Any] | None = None,
    *,
    on_condition_failed: OnConditionFailed | None = None,
) -> BusinessWrite:
    body = {
        "TableName": table_name,
        "Key": serialize_item(key),
        "UpdateExpression": update_expression,
        **_expression_parts(condition, names, values),
    }
    return BusinessWrite({"Update": body}, on_condition_failed)


def condition_check(
    table_name: str,
    key: Mapping[str, Any],
    condition: str,
    names: Mapping[str, str] | None = None,
    values: Mapping[str, Any] | None = None,
    *,
    on_condition_failed: OnConditionFailed | None = None,
) -> BusinessWrite:
    body = {
        "TableName": table_name,
        "Key": serialize_item(key),
        **_expression_parts(condition, names, values),
    }
    return BusinessWrite({"ConditionCheck": body}, on_condition_failed)


def delete(
    table_name: str,
    key: Mapping[str, Any],
    condition: str | None = None,
    names: Mapping[str, str] | None = None,
    values: Mapping[str, Any] | None = None,
    *,
    on_condition_failed: OnConditionFailed | None = None,
) -> BusinessWrite:
    body = {
        "TableName": table_name,
        "Key": serialize_item(key),
        **_expression_parts(condition, names, values),
    }
    return BusinessWrite({"Delete": body}, on_condition_failed)


def epoch_seconds(moment: datetime | None = None) -> int:
    """For TTL attributes (``expiresAt``): DynamoDB TTL wants epoch seconds as a Number."""
    return int((moment or datetime.now(UTC)).timestamp())
