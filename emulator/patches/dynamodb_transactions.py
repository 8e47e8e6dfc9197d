"""TransactWriteItems all-or-nothing without snapshots of its tables (patch 2).

moto's behaviour: ``DynamoDBBackend.transact_write_items`` (moto/dynamodb/models/__init__.py) backs up
the tables the transaction touches with ``copy.deepcopy`` (all their items and their whole stream
history, once per action naming the table) before applying the actions one by one, and restores the
copies when one fails. Each transaction costs time in proportion to the tables' size, so a long run gets
quadratically slower. Its answers differ from DynamoDB's in two places: a write invalid for the stored
item (``SET n = n + :one`` on a string, ADD on another type, list_append on a non-list, an attribute the
expression needs that is missing, an updated item over 400 KB, a key of the wrong type) is a bare
ValidationException instead of a cancellation; and an Update that creates its item emits two INSERT
stream records, the first with the key alone.

AWS's behaviour: the actions "are completed atomically so that either all of them succeed or none of
them succeeds", and a transaction cancelled for a condition or for "an item size becomes too large ...
or a similar validation error" answers ``TransactionCanceledException`` with one ``CancellationReasons``
entry per action, ``None`` for the actions that would have passed
(https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html,
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html); each item
change is one stream record (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Streams.html).
The replacement snapshots nothing and changes nothing until every action has passed: it checks each
condition against the stored item and computes each written item on a copy (an update expression is
validated and run against a copy of the stored item, a Put is validated like moto's PutItem; an item
must stay within 400 KB). Only then are the items swapped in, and their stream records appended once
each, in request order. A cancellation gives ``ConditionalCheckFailed`` (with the ALL_OLD item when
asked) or ``ValidationError`` with the single write's message. A request invalid as sent (syntax, an
undefined placeholder, a Put over 400 KB, two actions on one item) is refused with a
ValidationException, nothing applied, as moto does.

Upstream: yes. The snapshot is moto's largest cost in any long DynamoDB workload, and the two answers
are DynamoDB's documented ones; the two-phase shape fits moto's backend as it is.
``docs/upstream/dynamodb_transactions.md``.

Patches: moto 5.2.5, ``DynamoDBBackend.transact_write_items`` (and it calls moto's ``Table`` helpers
``_validate_item_types``, ``_validate_key_sizes``, ``get_item``, ``items`` and ``stream_shard.add``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PATCHES = {"moto": "5.2.5"}


class _Cancelled(Exception):
    """One action's cancellation reason (code, message, ALL_OLD item)."""

    def __init__(self, code: str, message: str, item: dict[str, Any] | None = None) -> None:
        super().__init__(code, message)
        self.reason = (code, message, item)


def _item_dependent_errors() -> tuple[type[Exception], ...]:
    """The failures of a write that depend on the stored item (or on a key's type). DynamoDB cancels
    the transaction with a ``ValidationError`` reason for that action; what is invalid as sent
    (syntax, an undefined placeholder, a Put over 400 KB, a missing key attribute) stays a plain
    ValidationException for the whole request."""
    from moto.dynamodb import exceptions as e

    return (
        e.IncorrectOperandType,  # SET n = n + :one on a string, list_append on a non-list
        e.IncorrectDataType,  # ADD / DELETE on an attribute of another type
        e.AttributeDoesNotExist,  # SET n = n + :one where n is missing
        e.InvalidUpdateExpressionInvalidDocumentPath,  # SET m.a = :v where m is missing
        e.ItemSizeToUpdateTooLarge,  # the updated item would exceed 400 KB
        e.InvalidAttributeTypeError,  # a table or index key of the wrong type
        e.ProvidedKeyDoesNotExist,  # a Key of the wrong type
    )


def _new_item(table: Any, attrs: dict[str, Any]) -> Any:
    """The item a PutItem of ``attrs`` would store, with moto's own checks (``Table.put_item``)."""
    from moto.dynamodb.exceptions import InvalidAttributeTypeError, MockValidationException
    from moto.dynamodb.models.dynamo_type import DynamoType, Item

    for attr in (table.hash_key_attr, table.range_key_attr):
        if attr is not None and attr not in attrs:
            raise MockValidationException(
                f"One or more parameter values were invalid: Missing the key {attr} in the item"
            )
    hash_key = DynamoType(attrs[table.hash_key_attr])
    range_key = DynamoType(attrs[table.range_key_attr]) if table.range_key_attr is not None else None
    if hash_key.type != table.hash_key_type:
        raise InvalidAttributeTypeError(table.hash_key_attr, table.hash_key_type, hash_key.type)
    if range_key is not None and range_key.type != table.range_key_type:
        raise InvalidAttributeTypeError(table.range_key_attr, table.range_key_type, range_key.type)
    table._validate_item_types(attrs)
    table._validate_key_sizes(attrs)
    return Item(hash_key, range_key, attrs)  # raises ItemSizeTooLarge over 400 KB


def _updated_item(table: Any, key: dict[str, Any], current: Any, op: dict[str, Any]) -> Any:
    """The item an UpdateItem would store, computed on a copy: what ``DynamoDBBackend.update_item``
    does, without touching the stored item."""
    import copy

    from moto.dynamodb.exceptions import ItemSizeTooLarge, ItemSizeToUpdateTooLarge
    from moto.dynamodb.models.dynamo_type import DynamoType, Item
    from moto.dynamodb.parsing.executors import UpdateExpressionExecutor
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]
    from moto.dynamodb.parsing.validators import UpdateExpressionValidator

    names: dict[str, str] = op.get("ExpressionAttributeNames") or {}
    values: dict[str, dict[str, Any]] = op.get("ExpressionAttributeValues") or {}
    ast = UpdateExpressionParser.make(op["UpdateExpression"])
    if current is None:
        # An update creates a missing item; like moto, validate against an empty item first.
        hash_key = DynamoType(key[table.hash_key_attr])
        range_key = DynamoType(key[table.range_key_attr]) if table.range_key_attr is not None else None
        UpdateExpressionValidator(
            ast,
            expression_attribute_names=names,
            expression_attribute_values=values,
            item=Item(hash_key, range_key, attrs={}),
            table=table,
        ).validate()
        attrs = {a: key[a] for a in (table.hash_key_attr, table.range_key_attr) if a is not None}
        item = _new_item(table, attrs)
    else:
        item = copy.deepcopy(current)
    validated = UpdateExpressionValidator(
        ast, expression_attribute_names=names, expression_attribute_values=values, item=item, table=table
    ).validate()
    validated.normalize()
    try:
        UpdateExpressionExecutor(validated, item, names).execute()
    except ItemSizeTooLarge:
        raise ItemSizeToUpdateTooLarge() from None
    return item


def _prepare(backend: Any, op_type: str, op: dict[str, Any], targets: set[tuple[str, str]]) -> Any:
    """Check one action against the stored state and compute what it writes, changing nothing.
    Returns ``(table, hash_key, range_key, old_item, new_item)`` for a write (``new_item`` None for a
    delete), None when there is nothing to write; raises ``_Cancelled`` for a failed condition."""
    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.exceptions import (
        ConditionalCheckFailed,
        MockValidationException,
        MultipleTransactionsException,
        ProvidedKeyDoesNotExist,
    )

    table = backend.get_table(op["TableName"])
    if op_type == "Put":
        new = _new_item(table, op["Item"])
        hash_key, range_key = new.hash_key, new.range_key
        key = {a: op["Item"][a] for a in (table.hash_key_attr, table.range_key_attr) if a is not None}
    elif op_type in ("Update", "Delete", "ConditionCheck"):
        key = op["Key"]
        hash_key, range_key = backend.get_keys_value(table, key)
        if hash_key.type != table.hash_key_type or (
            range_key is not None and range_key.type != table.range_key_type
        ):
            raise ProvidedKeyDoesNotExist()
    else:
        raise MockValidationException(f"Unsupported transaction action: {op_type}")
    target = (str(table.name), str(dict(sorted(key.items()))))
    if target in targets:
        raise MultipleTransactionsException()
    targets.add(target)

    current = table.get_item(hash_key, range_key)
    condition = op.get("ConditionExpression")
    if condition is not None and not get_filter_expression(
        condition, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
    ).expr(current):
        all_old = current is not None and op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD"
        old = current.to_json()["Attributes"] if all_old else None
        raise _Cancelled("ConditionalCheckFailed", ConditionalCheckFailed().message, old)
    if op_type == "Put":
        return table, hash_key, range_key, current, new
    if op_type == "Update":
        return table, hash_key, range_key, current, _updated_item(table, key, current, op)
    if op_type == "Delete" and current is not None:
        return table, hash_key, range_key, current, None
    return None  # a ConditionCheck, or a Delete of a missing item (no stream record either)


def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
    """``DynamoDBBackend.transact_write_items``, in two phases: check and compute, then apply."""
    from moto.dynamodb.exceptions import (
        TooManyTransactionsException,
        TransactionCanceledException,
        TransactWriteSingleOpException,
    )

    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    item_dependent = _item_dependent_errors()
    targets: set[tuple[str, str]] = set()
    reasons: list[tuple[str | None, str | None, dict[str, Any] | None]] = []
    writes: list[tuple[Any, Any, Any, Any, Any]] = []
    # Phase 1: every action is checked and its written item computed, nothing changes. An error
    # not listed here (a request invalid as sent, a missing table) propagates: nothing was applied.
    for action in transact_items:
        if len(action) > 1:
            raise TransactWriteSingleOpException
        op_type, op = next(iter(action.items()))
        try:
            write = _prepare(self, op_type, op, targets)
        except _Cancelled as cancelled:
            reasons.append(cancelled.reason)
        except item_dependent as invalid:
            reasons.append(("ValidationError", str(invalid.message), None))  # type: ignore[attr-defined]
        else:
            reasons.append((None, None, None))
            if write is not None:
                writes.append(write)
    if any(code is not None for code, _, _ in reasons):
        raise TransactionCanceledException(reasons)
    # Phase 2, which cannot fail: the items, then their stream records, once each, in request
    # order (a stream reader that then reads an item finds the committed state).
    for table, hash_key, range_key, _, new in writes:
        rows = table.items if range_key is None else table.items[hash_key]
        key = hash_key if range_key is None else range_key
        if new is None:
            rows.pop(key)
        else:
            rows[key] = new
    for table, _, _, old, new in writes:
        if table.stream_shard is not None:
            table.stream_shard.add(old, new)


def install() -> Callable[[], None]:
    """Install patch 2; returns a function that removes it."""
    from moto.dynamodb.models import DynamoDBBackend

    original = DynamoDBBackend.transact_write_items
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]

    def remove() -> None:
        DynamoDBBackend.transact_write_items = original  # type: ignore[method-assign]

    return remove
