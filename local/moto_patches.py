"""Patches that make moto usable as a long-running emulator. Shared by the sandbox's moto server process
and the in-process pipeline test, so both run the same code. Each patch replaces internals of moto 5.2.5
(patch 8 also of werkzeug 3.1.9's development server), which change between releases without notice:
`PATCHED_VERSIONS` names them, requirements-sandbox.txt pins them, and `install_for_server` refuses others.

1. moto keeps every model object it ever creates for its `/moto-api` dashboard (each received SQS
   message copy, each stream shard iterator): memory and CPU grow without bound in a long run.
2. moto's TransactWriteItems backs up EVERY table it touches with `copy.deepcopy` (items and the whole
   stream history) before applying, so a long run gets quadratically slower. The replacement snapshots
   nothing and changes nothing until every action has passed: it checks each condition against the
   stored item and computes each written item on a copy (an update expression is validated and run
   against a copy of the stored item, a Put is validated like moto's PutItem; an item must stay within
   400 KB). Only then are the items swapped in, and their stream records appended once each, in
   request order. So a transaction is all-or-nothing, as in DynamoDB, also when a write fails after
   the conditions passed. A cancelled transaction answers as DynamoDB does (TransactionCanceledException,
   one `CancellationReasons` entry per action, `None` for the actions that would have passed):
   `ConditionalCheckFailed` (with the ALL_OLD item when asked), or `ValidationError` with the single
   write's message for a write invalid for the stored item (an operand of the wrong type, e.g.
   `SET n = n + :one` on a string, ADD on another type, list_append on a non-list; an attribute the
   expression needs is missing; the updated item would exceed 400 KB; a key of the wrong type). A
   request invalid as sent (syntax, an undefined placeholder, a Put over 400 KB, two actions on one
   item) is refused with a ValidationException, nothing applied. moto's own implementation differs in
   two places: it answers a ValidationException for the write invalid for the stored item too, and an
   Update that creates its item emits a key-only INSERT and then a MODIFY (here: one INSERT with the
   new image, as DynamoDB does).
3. moto's server is threaded and its DynamoDB backend has no locks: two concurrent conditional writes
   could both pass their check. Every DynamoDB write (single or transactional) runs under one lock, so
   conditions are atomic as they are in DynamoDB — the property idempotency depends on. GetItem, Query,
   Scan and TransactGetItems take the same lock, so no reader sees a transaction half-committed.
4. Request routing and logging overhead (profiled with py-spy during `make demo`: about a fifth of the
   server's CPU): for every request moto's dispatcher lists its package directory and tries a few
   hundred URL regexes, under one lock, to find the service; and werkzeug writes an access-log line.
   The host -> service answer is cached (the mapping never changes in a run) and access logs are off
   (warnings and errors still reach the log). Likewise the list of a response class's methods, which
   moto rebuilt with `inspect.getmembers` on every request to look the action up.
5. For every message it delivers to an SQS subscription without raw delivery, moto's SNS builds and
   signs a brand-new X.509 certificate, and keeps its PEM forever. Real SNS signs with a stable
   certificate: the patch builds one per subscription and reuses it; each message is still signed.
6. moto 5.2 writes every response through a model-driven serializer that walks the botocore output
   shape value by value: for DynamoDB that was most of the emulator's CPU (a GetItem 8 ms of 10, a
   200-record GetRecords 650 ms). DynamoDB's data-plane results are already the wire JSON (moto builds
   them as AttributeValue dicts), so for those operations the result is dumped as JSON directly, with
   the serializer's own rules for the two non-JSON types (bytes -> base64, datetimes -> epoch seconds
   truncated to milliseconds), and only the output shape's top-level members. Errors keep the
   serializer. `tests/sandbox/test_moto_patches.py` runs a workload with both serializers and requires
   identical responses.
7. moto's SQS gets slower with every queued message: each message a ReceiveMessage returns is checked
   against the retention period by computing ALL the queue's attributes -- three passes over every
   message in the queue, each message's visibility taking two datetime conversions -- and
   GetQueueAttributes computes them all once per requested name. With a few hundred messages queued
   one ReceiveMessage took half a second: a backlog fed on itself. The patch reads the retention period
   directly, computes the attributes once per call, and tells visibility from `time.time()` (what
   moto's `unix_time_millis` computes through datetimes).
8. werkzeug's (3.1.9) development server, which moto's server runs on, answers every request with
   `Connection: close` (http.server cannot drain an unread request body before the next request
   line). Every AWS call then cost a new TCP connection on both sides and a new server thread: the
   sandbox's clients opened ~70 connections a second. The server's request handler reads each
   request's body up front (it is bounded by Content-Length), so the next request line is always
   where the stream stands, and keeps HTTP/1.1 connections open; a chunked upload, or a client that
   asks for it, still closes. An idle connection is closed after two minutes. (After each response
   werkzeug also reads whatever the client sent next, to discard an unread body; on a kept-alive
   connection that would swallow the next request, so it is skipped there.)
9. Every lookup of a service backend by account (several per request: the service's own, IAM's
   "access key last used") takes moto's one global backend lock and compares the backend against
   every registered one (~150); under load the server's threads queued on that lock. A backend that
   exists and is registered is returned without the lock; the first lookup still takes moto's path.
10. moto 5.2 has no DLQ redrive (`StartMessageMoveTask`, `ListMessageMoveTasks`, `CancelMessageMoveTask`:
   a NotImplementedError, HTTP 500). The patch adds them to moto's SQS handler, in SQS's JSON protocol,
   with the answers AWS gives (see `_MoveTasks`); a task moves messages in a background thread of the
   server process. For a redrive to each message's original source queue (no `DestinationArn`), each
   moto message remembers the queue it was first enqueued in: moto's redrive policy moves the message
   object itself, so in a DLQ it still names its source. A message sent to the DLQ directly (the
   kernel's parking, SNS's dead-lettering) has no other source: as on AWS, such a task FAILS with
   `CouldNotDetermineMessageSource` when it reaches one; redrive those with a `DestinationArn`.
11. moto ignores TransactWriteItems' `ClientRequestToken`, which botocore fills in on every call
   (an idempotency token in the service model) and keeps across its retries. On AWS a retry of a
   transaction that committed, but whose reply was lost, succeeds without applying anything again;
   on moto it fails its own conditions (`TransactionCanceledException`), a failure AWS would not give.
   The patch keeps, for 10 minutes after each successful call, its token and a digest of its
   parameters: the same token with the same parameters answers success without running anything,
   with other parameters `IdempotentParameterMismatchException` (400), as DynamoDB documents.
12. moto's Query of a table (not of an index) lists and sorts every item of the table, then keeps
   those of the asked partition: each Query cost O(n log n) in the table's size (0.5 s on a
   7,763-item table), so a long run's reads, and chaos's verdict, grew quadratic. The items are
   already held by partition: the patch hands Query that partition alone, and moto's own code does the
   rest (range conditions, order, pages, limits, filters, projections) unchanged. An index Query
   still reads every item (moto keeps no index), but unsorted: moto sorts its matches by the index
   and table keys afterwards, a total order, so the first sort was wasted. Scan keeps moto's path.
13. moto's update-expression validator deep-copies the AST it is given before rewriting it in place
   (9 % of the emulator's CPU in a chaos run, py-spy; twice the parse's 4 %). Each AST is parsed
   for one UpdateItem (or one action of a transaction) and validated once, or twice when the update
   creates its item. The patch hands the first validation the parsed AST itself and any later one a
   fresh parse of the same expression, so every validation still starts from a pristine tree.
"""

from __future__ import annotations

import base64
import json
import socket
import sys
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

# The versions the patches were written and tested for (tests/sandbox/test_moto_patches.py). A new version
# means re-reading the patched code: then bump them here and in requirements-sandbox.txt together.
PATCHED_VERSIONS = {"moto": "5.2.5", "werkzeug": "3.1.9"}

_WRITE_LOCK = threading.RLock()
_WRITES = ("put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item")
# Reads take the same lock, so none sees a transaction half-committed. TransactGetItems is read item
# by item by moto's request handler: it is locked there, so a transaction cannot commit between two.
_READS = ("get_item", "query", "scan")


def untrack_models() -> None:
    from moto.core.common_models import BaseModel

    def _untracked_new(cls: type, *args: Any, **kwargs: Any) -> Any:
        return object.__new__(cls)

    BaseModel.__new__ = _untracked_new  # type: ignore[method-assign]


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


def _transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
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


CLIENT_TOKEN_SECONDS = 600  # DynamoDB: a token is valid for 10 minutes after its first call completed
# ClientRequestToken -> (parameters digest, when it succeeded), oldest first (expired from the front).
_TOKENS: OrderedDict[str, tuple[str, float]] = OrderedDict()


def _idempotent_transact_write_items(original: Callable[..., Any]) -> Callable[..., Any]:
    """Patch 11: the handler's TransactWriteItems, honouring ClientRequestToken."""
    import hashlib

    def transact_write_items(self: Any) -> Any:
        token = self.body.get("ClientRequestToken")
        if not token:
            return original(self)
        parameters = {k: v for k, v in self.body.items() if k != "ClientRequestToken"}
        digest = hashlib.sha256(json.dumps(parameters, sort_keys=True).encode()).hexdigest()
        with _WRITE_LOCK:
            now = time.monotonic()
            while _TOKENS and now - next(iter(_TOKENS.values()))[1] > CLIENT_TOKEN_SECONDS:
                _TOKENS.popitem(last=False)
            seen = _TOKENS.get(token)
            if seen is not None:
                if seen[0] != digest:
                    from moto.dynamodb.exceptions import DynamodbException

                    raise DynamodbException(
                        "com.amazonaws.dynamodb.v20120810#IdempotentParameterMismatchException",
                        "The request uses the same client token as a previous, but non-identical request.",
                    )
                from moto.core.responses import ActionResult

                return ActionResult({"ConsumedCapacity": [], "ItemCollectionMetrics": {}})  # as moto's
            answer = original(self)
            _TOKENS[token] = (digest, time.monotonic())
            return answer

    transact_write_items.__wrapped__ = original  # type: ignore[attr-defined]
    return transact_write_items


def _locked(method: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _WRITE_LOCK:
            return method(*args, **kwargs)

    wrapper.__wrapped__ = method  # type: ignore[attr-defined]
    return wrapper


def _install_dynamodb() -> list[tuple[type, str, Callable[..., Any]]]:
    """Patches 2 and 3; returns ``(class, name, original)`` for each method replaced."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.responses import DynamoHandler

    originals: list[tuple[type, str, Callable[..., Any]]] = [
        (DynamoDBBackend, name, getattr(DynamoDBBackend, name)) for name in _WRITES + _READS
    ]
    originals.append((DynamoHandler, "transact_get_items", DynamoHandler.transact_get_items))
    for cls, name, method in originals:
        setattr(cls, name, _locked(_transact_write_items if name == "transact_write_items" else method))
    originals.append((DynamoHandler, "transact_write_items", DynamoHandler.transact_write_items))
    DynamoHandler.transact_write_items = _idempotent_transact_write_items(  # type: ignore[method-assign]
        DynamoHandler.transact_write_items
    )
    return originals


@contextmanager
def fast_atomic_dynamodb() -> Iterator[None]:
    """Install patches 2 and 3 for the duration of the block."""
    originals = _install_dynamodb()
    try:
        yield
    finally:
        for cls, name, method in originals:
            setattr(cls, name, method)


def fast_routing() -> None:
    import logging

    from moto import backends
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules
    original = DomainDispatcherApplication.get_backend_for_host
    cache: dict[str | None, Any] = {}

    def get_backend_for_host(self: Any, host: str | None) -> Any:
        if host not in cache:
            cache[host] = original(self, host)
        return cache[host]

    DomainDispatcherApplication.get_backend_for_host = get_backend_for_host  # type: ignore[method-assign]
    import functools

    import moto.core.responses
    from moto.core.utils import method_names_from_class as listed

    @functools.cache
    def method_names_from_class(clazz: type) -> frozenset[str]:
        return frozenset(listed(clazz))

    moto.core.responses.method_names_from_class = method_names_from_class  # type: ignore[attr-defined,assignment]
    logging.getLogger("werkzeug").setLevel(logging.WARNING)


_SIGNING_CERTS: dict[str, str] = {}


def stable_sns_signing_cert() -> None:
    import base64
    from datetime import timedelta

    import cryptography.x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding
    from cryptography.x509 import Name, NameAttribute
    from cryptography.x509.oid import NameOID
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.core.utils import iso_8601_datetime_with_milliseconds, utcnow
    from moto.sns.models import Subscription, sns_backends

    def get_post_data(
        self: Any,
        message: str,
        message_id: str,
        subject: str | None,
        message_attributes: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        key = self.private_key()
        region = self.topic.sns_backend.region_name
        key_name = _SIGNING_CERTS.get(self.arn)
        if key_name is None:
            issuer = [
                NameAttribute(NameOID.COUNTRY_NAME, "US"),
                NameAttribute(NameOID.ORGANIZATION_NAME, "Amazon"),
                NameAttribute(NameOID.COMMON_NAME, "Amazon RSA 2048 M01"),
            ]
            cert = (
                cryptography.x509.CertificateBuilder()
                .subject_name(Name([NameAttribute(NameOID.COMMON_NAME, "sns.amazonaws.com")]))
                .issuer_name(Name(issuer))
                .public_key(key.public_key())
                .serial_number(cryptography.x509.random_serial_number())
                .not_valid_before(utcnow())
                .not_valid_after(utcnow() + timedelta(days=365))
                .sign(key, hashes.SHA256())
            )
            key_name = f"SimpleNotificationService-{len(_SIGNING_CERTS):08d}.pem"
            sns_backends[DEFAULT_ACCOUNT_ID][region]._message_public_keys[key_name] = cert.public_bytes(
                serialization.Encoding.PEM
            )
            _SIGNING_CERTS[self.arn] = key_name
        timestamp = iso_8601_datetime_with_milliseconds()
        string_to_sign = (
            f"Message\n{message}\nMessageId\n{message_id}\nTimestamp\n{timestamp}\n"
            f"TopicArn\n{self.topic.arn}\nType\nNotification\n"
        )
        signature = key.sign(string_to_sign.encode("UTF-8"), padding.PKCS1v15(), hashes.SHA256())
        post_data: dict[str, Any] = {
            "Type": "Notification",
            "MessageId": message_id,
            "TopicArn": self.topic.arn,
            "Message": message,
            "Timestamp": timestamp,
            "SignatureVersion": "2",
            "Signature": base64.b64encode(signature).decode("utf-8"),
            "SigningCertURL": f"https://sns.{region}.amazonaws.com/{key_name}",
            "UnsubscribeURL": f"https://sns.{region}.amazonaws.com/?Action=Unsubscribe&SubscriptionArn={self.arn}",
        }
        if subject:
            post_data["Subject"] = subject
        if message_attributes:
            post_data["MessageAttributes"] = message_attributes
        return post_data

    Subscription.get_post_data = get_post_data  # type: ignore[method-assign]


# The operations whose results are wire-format JSON already (see 6.); control-plane operations such as
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
)
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


def fast_json_results() -> Callable[[], None]:
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
        body = json.dumps(wire, default=_json_default, separators=(",", ":"))
        headers = {"Content-Type": f"application/x-amz-json-{context.service_model.metadata['jsonVersion']}"}
        if VERIFY_FAST_JSON is not None:
            VERIFY_FAST_JSON.append((*key, (200, dict(headers), json.loads(body)), original(self, context)))
        return 200, headers, body

    ActionResult.execute_result = execute_result  # type: ignore[method-assign]

    def remove() -> None:
        ActionResult.execute_result = original  # type: ignore[method-assign]

    return remove


def fast_sqs() -> Callable[[], None]:
    """Install patch 7; returns a function that removes it."""
    import time

    from moto.sqs.exceptions import InvalidAttributeName
    from moto.sqs.models import Message, SQSBackend

    def visible(self: Any) -> bool:
        return bool(time.time() * 1000.0 > self.visible_at)

    def delayed(self: Any) -> bool:
        return bool(time.time() * 1000.0 < self.delayed_until)

    def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
        retention = int(self.get_queue(queue_name).message_retention_period)
        return bool(retention + message.sent_timestamp / 1000 > time.time())

    def get_queue_attributes(self: Any, queue_name: str, attribute_names: list[str]) -> dict[str, Any]:
        queue = self.get_queue(queue_name)
        if not attribute_names:
            return {}
        valid = ["All", *queue.BASE_ATTRIBUTES, *queue.FIFO_ATTRIBUTES, *queue.KMS_ATTRIBUTES]
        invalid = next((name for name in attribute_names if name not in valid), None)
        if invalid or invalid == "":
            raise InvalidAttributeName(invalid)
        attributes: dict[str, Any] = queue.attributes  # computed once
        if "All" in attribute_names:
            return attributes
        return {n: attributes[n] for n in attribute_names if attributes.get(n) is not None}

    saved = (
        Message.visible,
        Message.delayed,
        SQSBackend.is_message_valid_based_on_retention_period,
        SQSBackend.get_queue_attributes,
    )

    def remove() -> None:
        (
            Message.visible,  # type: ignore[method-assign]
            Message.delayed,  # type: ignore[method-assign]
            SQSBackend.is_message_valid_based_on_retention_period,  # type: ignore[method-assign]
            SQSBackend.get_queue_attributes,  # type: ignore[method-assign]
        ) = saved

    Message.visible = property(visible)  # type: ignore[method-assign,assignment]
    Message.delayed = property(delayed)  # type: ignore[method-assign,assignment]
    SQSBackend.is_message_valid_based_on_retention_period = is_message_valid_based_on_retention_period  # type: ignore[method-assign]
    SQSBackend.get_queue_attributes = get_queue_attributes  # type: ignore[method-assign]
    return remove


_KEEP_ALIVE = threading.local()


class _SelectorsWithoutDrain:
    """``werkzeug.serving``'s ``selectors`` (used only for the post-response drain): on a kept-alive
    connection the drain's selector reports nothing to read."""

    def __getattr__(self, name: str) -> Any:
        import selectors

        return getattr(selectors, name)

    @staticmethod
    def DefaultSelector() -> Any:
        import selectors

        selector = selectors.DefaultSelector()
        if getattr(_KEEP_ALIVE, "on", False):
            selector.select = lambda timeout=None: []  # type: ignore[method-assign]
        return selector


def keep_alive_request_handler() -> type:
    """Patch 8: moto's request handler, keeping HTTP/1.1 connections open."""
    import io

    import werkzeug.serving
    from moto.moto_server.werkzeug_app import MotoRequestHandler

    werkzeug.serving.selectors = _SelectorsWithoutDrain()  # type: ignore[attr-defined,assignment]

    class KeepAliveRequestHandler(MotoRequestHandler):
        """Whether the current request's connection stays open is ``_KEEP_ALIVE.on``: one flag per
        server thread, read here and by the drain's selector."""

        timeout = 120  # seconds an idle connection may hold its server thread

        def setup(self) -> None:
            super().setup()
            # Headers and body go out in two writes: with Nagle's algorithm the second waits for
            # the client's delayed ACK of the first (40 ms) on a kept-alive connection.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def handle_one_request(self) -> None:
            _KEEP_ALIVE.on = False
            super().handle_one_request()

        def make_environ(self) -> dict[str, Any]:
            environ = super().make_environ()
            if environ.get("wsgi.input_terminated"):  # chunked request body: close afterwards
                return environ
            try:
                size = int(environ.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return environ
            environ["wsgi.input"] = io.BytesIO(self.rfile.read(size) if size > 0 else b"")
            _KEEP_ALIVE.on = not self.close_connection  # HTTP/1.1, not asked to close
            return environ

        def send_header(self, keyword: str, value: str) -> None:
            if _KEEP_ALIVE.on and keyword.lower() == "connection" and value.lower() == "close":
                return
            super().send_header(keyword, value)

    return KeepAliveRequestHandler


def lock_free_backend_lookup() -> Callable[[], None]:
    """Patch 9; returns a function that removes it."""
    from moto.core.base_backend import BackendDict

    original = BackendDict.__getitem__
    registered: set[int] = set()

    def __getitem__(self: Any, account_id: str) -> Any:
        if id(self) in registered and dict.__contains__(self, account_id):
            return dict.__getitem__(self, account_id)
        backend = original(self, account_id)  # creates and registers under moto's lock
        registered.add(id(self))
        return backend

    BackendDict.__getitem__ = __getitem__  # type: ignore[method-assign]

    def remove() -> None:
        BackendDict.__getitem__ = original  # type: ignore[method-assign]

    return remove


# -- 10. DLQ redrive: SQS message move tasks ----------------------------------------------------------

# The attribute in which each moto message keeps the ARN of the queue it was first enqueued in.
_ENQUEUED_IN = "_relay_enqueued_in"
# A message being moved is invisible in the DLQ this long; a move that fails makes it visible at once.
_MOVE_VISIBILITY_SECONDS = 30
# ListMessageMoveTasks answers at most the 10 most recent tasks of a source queue: older ones are dropped.
_TASKS_KEPT = 10
_MAX_RATE = 500
_ACTIVE = ("RUNNING", "CANCELLING")
_NON_EXISTENT_QUEUE = "AWS.SimpleQueueService.NonExistentQueue"


class _SqsError(Exception):
    """An SQS error answer: the code botocore surfaces as ``Error.Code``, the message, the HTTP status."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def _invalid(message: str) -> _SqsError:
    return _SqsError("InvalidParameterValue", message)


class _TaskFailed(Exception):
    """Ends a running task in FAILED; the argument is its ``FailureReason``."""


@dataclass
class _MoveTask:
    task_id: str
    source_arn: str
    source: Any  # the moto Queue: a queue deleted and created again is another object, without tasks
    destination_arn: str | None
    rate: int | None  # MaxNumberOfMessagesPerSecond, None: as fast as the server goes
    started_at: float  # time.time()
    to_move: int
    moved: int = 0
    status: str = "RUNNING"
    failure_reason: str | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)
    # Held for each move and by Cancel: once Cancel has answered, no further message moves.
    lock: threading.Lock = field(default_factory=threading.Lock)
    clock_start: float = field(default_factory=time.monotonic)

    @property
    def handle(self) -> str:
        """AWS's format: base64 of ``{"taskId": ..., "sourceArn": ...}`` (``local.iam_requests`` reads it)."""
        doc = json.dumps({"taskId": self.task_id, "sourceArn": self.source_arn}, separators=(",", ":"))
        return base64.b64encode(doc.encode()).decode()

    def entry(self) -> dict[str, Any]:
        """The task as a ListMessageMoveTasksResultEntry."""
        with self.lock:
            entry: dict[str, Any] = {
                "Status": self.status,
                "SourceArn": self.source_arn,
                "ApproximateNumberOfMessagesMoved": self.moved,
                "ApproximateNumberOfMessagesToMove": self.to_move,
                "StartedTimestamp": int(self.started_at * 1000),
            }
            if self.status == "RUNNING":  # AWS returns the handle only while the task runs
                entry["TaskHandle"] = self.handle
            if self.destination_arn is not None:
                entry["DestinationArn"] = self.destination_arn
            if self.rate is not None:
                entry["MaxNumberOfMessagesPerSecond"] = self.rate
            if self.failure_reason is not None:
                entry["FailureReason"] = self.failure_reason
        return entry


def _arn_parts(arn: Any, parameter: str) -> tuple[str, str, str]:
    """(account, region, queue name) of an SQS queue ARN parameter."""
    parts = arn.split(":") if isinstance(arn, str) else []
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "sqs" or not all(parts[3:]):
        raise _invalid(
            f"You must use this format to specify the {parameter}: "
            "arn:<partition>:<service>:<region>:<account-id>:<resource-id>"
        )
    return parts[4], parts[3], parts[5]


def _queue_at(arn: Any, parameter: str) -> tuple[Any, Any]:
    """(backend, queue) named by a queue ARN parameter, or the error SQS answers."""
    from moto.sqs.models import sqs_backends

    account, region, name = _arn_parts(arn, parameter)
    try:
        backend = sqs_backends[account][region]
        queue = backend.queues.get(name)
    except KeyError:  # a region moto does not know
        queue = None
    if queue is None:
        raise _SqsError(
            "ResourceNotFoundException",
            f"The resource that you specified for the {parameter} parameter doesn't exist.",
            404,
        )
    return backend, queue


class _MoveTasks:
    """The server's move tasks, newest first per source queue ARN.

    The errors are the ones AWS answers, as LocalStack's snapshot tests recorded them against AWS
    (tests/aws/services/sqs/test_sqs_move_task.snapshot.json): a source that is not a DLQ, a second
    task while one is active, a destination or source that does not exist, a task handle that cannot
    be read or names no task. Not recorded, so code and wording are the sandbox's: a malformed ARN, a
    rate or MaxResults out of range, a destination of the other queue type or equal to the source,
    and cancelling a task that no longer runs (AWS: "only when the current status is RUNNING")."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_source: dict[str, list[_MoveTask]] = {}

    def _tasks(self, source_arn: str, source: Any) -> list[_MoveTask]:
        return [t for t in self.by_source.get(source_arn, []) if t.source is source]

    def start(self, source_arn: Any, destination_arn: Any, rate: Any) -> str:
        backend, source = _queue_at(source_arn, "SourceArn")
        if rate is not None and not (isinstance(rate, int) and 1 <= rate <= _MAX_RATE):
            raise _invalid(
                f"Value {rate} for parameter MaxNumberOfMessagesPerSecond is invalid. "
                f"Reason: You must enter a number that's between 1 and {_MAX_RATE}."
            )
        if not backend.list_dead_letter_source_queues(source.name):
            raise _invalid("Source queue must be configured as a Dead Letter Queue.")
        if destination_arn:
            _, destination = _queue_at(destination_arn, "DestinationArn")
            if destination is source:
                raise _invalid("Source queue arn and destination queue arn cannot be the same.")
            if bool(destination.fifo_queue) != bool(source.fifo_queue):
                raise _invalid("The source queue and destination queue must be of the same queue type.")
        with self.lock:
            tasks = self._tasks(source_arn, source)
            if any(t.status in _ACTIVE for t in tasks):
                raise _invalid(
                    "There is already a task running. Only one active task is allowed for a source queue "
                    "arn at a given time."
                )
            task = _MoveTask(
                task_id=str(uuid.uuid4()),
                source_arn=source_arn,
                source=source,
                destination_arn=destination_arn or None,
                rate=rate,
                started_at=time.time(),
                to_move=int(source.approximate_number_of_messages),
            )
            self.by_source[source_arn] = [task, *tasks][:_TASKS_KEPT]
        worker = threading.Thread(target=_run_move_task, args=(task,), name=f"move-task-{task.task_id}")
        worker.daemon = True
        worker.start()
        return task.handle

    def list(self, source_arn: Any, max_results: Any) -> list[dict[str, Any]]:
        _, source = _queue_at(source_arn, "SourceArn")
        count = 1 if max_results is None else max_results
        if not (isinstance(count, int) and 1 <= count <= _TASKS_KEPT):
            raise _invalid(
                f"Value {max_results} for parameter MaxResults is invalid. "
                f"Reason: You must enter a number that's between 1 and {_TASKS_KEPT}."
            )
        with self.lock:
            tasks = self._tasks(source_arn, source)[:count]
        return [t.entry() for t in tasks]

    def cancel(self, handle: Any) -> int:
        try:
            doc = json.loads(base64.b64decode(str(handle), validate=True))
            task_id, source_arn = str(doc["taskId"]), str(doc["sourceArn"])
        except (ValueError, TypeError, KeyError):  # binascii.Error and UnicodeDecodeError are ValueErrors
            raise _invalid("Value for parameter TaskHandle is invalid.") from None
        _, source = _queue_at(source_arn, "SourceArn")
        with self.lock:
            task = next((t for t in self._tasks(source_arn, source) if t.task_id == task_id), None)
        if task is None:
            raise _SqsError("ResourceNotFoundException", "Task does not exist.", 404)
        with task.lock:
            if task.status != "RUNNING":
                raise _SqsError(
                    "AWS.SimpleQueueService.UnsupportedOperation",
                    f"Only a task in status RUNNING can be cancelled; task {task_id} is {task.status}.",
                )
            task.status = "CANCELLING"
            task.cancelled.set()
            return task.moved

    def stop_all(self) -> None:
        with self.lock:
            tasks = [t for ts in self.by_source.values() for t in ts]
            self.by_source.clear()
        for task in tasks:
            task.cancelled.set()


MOVE_TASKS = _MoveTasks()


def _run_move_task(task: _MoveTask) -> None:
    """Move the task's messages one at a time, the k-th no earlier than k / rate seconds after the
    start; stop when ``to_move`` have moved (a message parked again meanwhile is not chased round),
    the DLQ has no visible message left, the task is cancelled, or a move fails."""
    failure: str | None = None
    try:
        while True:
            with task.lock:
                if task.cancelled.is_set() or task.moved >= task.to_move:
                    break
                due = task.clock_start + task.moved / task.rate if task.rate else 0.0
            wait = due - time.monotonic()
            if wait > 0 and task.cancelled.wait(wait):
                break
            with task.lock:
                if task.cancelled.is_set() or not _move_one(task):
                    break
                task.moved += 1
    except _TaskFailed as failed:
        failure = str(failed)
    except Exception as exc:  # a bug here: keep the server up, and say so
        failure = type(exc).__name__
        print(f"move task {task.task_id} ({task.source_arn}) failed: {exc!r}", file=sys.stderr)
    with task.lock:
        if failure is not None:
            task.status, task.failure_reason = "FAILED", failure
        else:
            task.status = "CANCELLED" if task.cancelled.is_set() else "COMPLETED"


def _move_one(task: _MoveTask) -> bool:
    """Receive one message from the DLQ, send its body and message attributes to the destination as a
    new message, delete it from the DLQ. False when the DLQ has no visible message."""
    from moto.sqs.models import sqs_backends

    account, region, name = _arn_parts(task.source_arn, "SourceArn")
    backend = sqs_backends[account][region]
    if backend.queues.get(name) is not task.source:
        raise _TaskFailed(_NON_EXISTENT_QUEUE)
    received = backend.receive_message(name, 1, 0, _MOVE_VISIBILITY_SECONDS, ["All"])
    if not received:
        return False
    message = received[0]
    receipt = str(message.receipt_handle)
    try:
        destination = task.destination_arn or _original_source(message, task.source_arn)
        if destination is None:
            raise _TaskFailed("CouldNotDetermineMessageSource")
        _send_moved(message, destination)
    except BaseException:
        backend.change_message_visibility(name, receipt, visibility_timeout=0)  # left as it was
        raise
    backend.delete_message(name, receipt)
    return True


def _original_source(message: Any, dlq_arn: str) -> str | None:
    """The queue moto's redrive policy moved ``message`` out of; None for a message sent to the DLQ."""
    enqueued_in = getattr(message, _ENQUEUED_IN, None)
    return enqueued_in if enqueued_in and enqueued_in != dlq_arn else None


def _send_moved(message: Any, destination_arn: str) -> None:
    from moto.sqs.models import sqs_backends

    account, region, name = _arn_parts(destination_arn, "DestinationArn")
    try:
        backend = sqs_backends[account][region]
        queue = backend.queues.get(name)
    except KeyError:
        queue = None
    if queue is None:
        raise _TaskFailed(_NON_EXISTENT_QUEUE)
    # A new message: new id, sent now, never received (AWS: "considered new messages").
    fifo = {"group_id": message.group_id, "deduplication_id": message.deduplication_id or message.id}
    backend.send_message(
        name,
        message.body,
        message_attributes=dict(message.message_attributes) or None,
        system_attributes=dict(message.system_attributes) or None,
        **(fifo if queue.fifo_queue else {}),
    )


def _sqs_answer(call: Callable[[], dict[str, Any]]) -> Any:
    """The handler's answer: the result for moto's serializer, or the error as SQS's JSON protocol
    carries it (botocore takes the code from the query-compatibility header)."""
    from moto.core.responses import ActionResult

    try:
        return ActionResult(call())
    except _SqsError as error:
        body = json.dumps({"__type": f"com.amazonaws.sqs#{error.code}", "message": error.message})
        headers = {
            "status": error.status,
            "Content-Type": "application/x-amz-json-1.0",
            "x-amzn-query-error": f"{error.code};Sender",
        }
        return body, headers


def _start_message_move_task(self: Any) -> Any:
    return _sqs_answer(
        lambda: {
            "TaskHandle": MOVE_TASKS.start(
                self._get_param("SourceArn"),
                self._get_param("DestinationArn"),
                self._get_param("MaxNumberOfMessagesPerSecond"),
            )
        }
    )


def _list_message_move_tasks(self: Any) -> Any:
    return _sqs_answer(
        lambda: {"Results": MOVE_TASKS.list(self._get_param("SourceArn"), self._get_param("MaxResults"))}
    )


def _cancel_message_move_task(self: Any) -> Any:
    return _sqs_answer(
        lambda: {"ApproximateNumberOfMessagesMoved": MOVE_TASKS.cancel(self._get_param("TaskHandle"))}
    )


_MOVE_TASK_OPERATIONS = {
    "start_message_move_task": _start_message_move_task,
    "list_message_move_tasks": _list_message_move_tasks,
    "cancel_message_move_task": _cancel_message_move_task,
}


def message_move_tasks() -> Callable[[], None]:
    """Install patch 10; returns a function that removes it (and stops the tasks still running).
    Install it before the server answers its first request: patch 4 caches the handler's methods."""
    from moto.sqs.models import Queue
    from moto.sqs.responses import SQSResponse

    original_add_message = Queue.add_message

    def add_message(self: Any, message: Any) -> None:
        if getattr(message, _ENQUEUED_IN, None) is None:
            setattr(message, _ENQUEUED_IN, self.queue_arn)
        original_add_message(self, message)

    Queue.add_message = add_message  # type: ignore[method-assign]
    for name, operation in _MOVE_TASK_OPERATIONS.items():
        setattr(SQSResponse, name, operation)

    def remove() -> None:
        Queue.add_message = original_add_message  # type: ignore[method-assign]
        for name in _MOVE_TASK_OPERATIONS:
            delattr(SQSResponse, name)
        MOVE_TASKS.stop_all()

    return remove


def check_patched_versions() -> None:
    """Fail loudly, before patching, when the installed moto or werkzeug is not the version patched."""
    from importlib.metadata import version

    wrong = [(n, v, version(n)) for n, v in PATCHED_VERSIONS.items() if version(n) != v]
    if wrong:
        raise RuntimeError(
            "local/moto_patches.py patches "
            + ", ".join(f"{name} {patched} but {name} {found} is installed" for name, patched, found in wrong)
            + ": `make install` installs the locked versions; to move to others, re-check each patch against "
            "them and update PATCHED_VERSIONS and requirements-sandbox.txt together"
        )


_PARTITION = threading.local()  # (table, hash key) while a table Query runs on this thread


def partition_query() -> Callable[[], None]:
    """Install patch 12; returns a function that removes it."""
    import inspect

    from moto.dynamodb.models.table import Table

    original_query, original_all_items = Table.query, Table.all_items
    signature = inspect.signature(original_query)

    def query(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        index, hash_key = bound.arguments.get("index_name"), bound.arguments.get("hash_key")
        if not index and hash_key is None:
            return original_query(self, *args, **kwargs)
        _PARTITION.key = (self, None if index else hash_key)
        try:
            return original_query(self, *args, **kwargs)
        finally:
            _PARTITION.key = None

    def all_items(self: Any) -> Any:
        hint = getattr(_PARTITION, "key", None)
        if hint is None or hint[0] is not self:
            return original_all_items(self)
        if hint[1] is None:  # an index Query: every item, in any order
            if not self.range_key_attr:
                return list(self.items.values())
            return [item for partition in self.items.values() for item in partition.values()]
        if hint[1] not in self.items:  # a defaultdict: a lookup must not create the partition
            return []
        partition = self.items[hint[1]]
        # Unsorted: moto's Query sorts the partition by its range key itself.
        return list(partition.values()) if self.range_key_attr else [partition]

    def remove() -> None:
        Table.query, Table.all_items = original_query, original_all_items  # type: ignore[method-assign]

    Table.query, Table.all_items = query, all_items  # type: ignore[method-assign]
    return remove


def single_use_update_asts() -> Callable[[], None]:
    """Install patch 13; returns a function that removes it."""
    import inspect

    from moto.dynamodb.parsing import validators
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]

    original_make = UpdateExpressionParser.__dict__["make"]
    original_init = validators.Validator.__init__
    signature = inspect.signature(original_init)

    def parse(expression_str: str) -> Any:
        ast = original_make.__func__(UpdateExpressionParser, expression_str)
        ast.relay_source = expression_str  # parsed here: its validations can skip the deep copy
        return ast

    def make(cls: Any, expression_str: str) -> Any:
        return (
            parse(expression_str)
            if cls is UpdateExpressionParser
            else original_make.__func__(cls, expression_str)
        )

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        expression = bound.arguments["expression"]
        source = getattr(expression, "relay_source", None)
        if source is None:  # an AST from elsewhere: moto's own copy
            original_init(self, *args, **kwargs)
            return
        # What moto's __init__ does, without its deepcopy: the first validation takes the parsed tree
        # itself (and rewrites it), a later one a fresh parse of the same expression.
        self.expression_attribute_names = bound.arguments["expression_attribute_names"]
        self.expression_attribute_values = bound.arguments["expression_attribute_values"]
        self.item = bound.arguments["item"]
        self.table = bound.arguments["table"]
        self.processors = self.get_ast_processors()
        if getattr(expression, "relay_validated", False):
            self.node_to_validate = parse(source)
        else:
            expression.relay_validated = True
            self.node_to_validate = expression

    def remove() -> None:
        UpdateExpressionParser.make = original_make
        validators.Validator.__init__ = original_init  # type: ignore[method-assign]

    UpdateExpressionParser.make = classmethod(make)
    validators.Validator.__init__ = init  # type: ignore[method-assign]
    return remove


def install_for_server() -> None:
    """All patches, for the lifetime of a moto server process. (Not through the context manager: a
    generator-based one that is garbage-collected runs its `finally` and would undo the patch.)"""
    check_patched_versions()
    untrack_models()
    _install_dynamodb()
    message_move_tasks()  # before fast_routing, which caches the handlers' methods
    fast_routing()
    stable_sns_signing_cert()
    fast_json_results()
    fast_sqs()
    lock_free_backend_lookup()
    partition_query()
    single_use_update_asts()
    import moto.server

    moto.server.MotoRequestHandler = keep_alive_request_handler()  # type: ignore[attr-defined,assignment]
