"""Every DynamoDB write, and the reads, under one lock: conditions atomic as in DynamoDB (patch 3).

moto's behaviour: moto's server answers each request in its own thread (werkzeug's ``threaded=True``)
and its DynamoDB backend (moto/dynamodb/models/__init__.py, ``DynamoDBBackend.put_item``,
``update_item``, ``delete_item``, ``transact_write_items``, ``batch_write_item``) takes no lock between
reading the stored item, evaluating the condition and writing. Two concurrent conditional writes of one
item can both pass their check: two ``attribute_not_exists(pk)`` Puts both succeed. A reader
(``get_item``, ``query``, ``scan``, and ``DynamoHandler.transact_get_items`` in
moto/dynamodb/responses.py, which reads item by item) can see a transaction half-applied.

AWS's behaviour: a conditional write is atomic: the condition is evaluated against the item as it is
when the write applies, so of two writes racing on ``attribute_not_exists`` one fails with
ConditionalCheckFailedException
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html#Expressions.ConditionExpressions.PreventingOverwrites);
transactions are serializable with other writes, and a read never sees part of a transaction
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-isolation).
The patch runs each of those methods under one re-entrant lock, ``WRITE_LOCK``; idempotency built on
conditional writes depends on it.

Upstream: yes. Anyone who tests concurrency against ``moto_server`` or ``ThreadedMotoServer`` gets
double winners that DynamoDB never produces; a per-backend lock around the write and read methods is a
small change. ``docs/upstream/dynamodb_lock.md``.

Patches: moto 5.2.5, the ``DynamoDBBackend`` and ``DynamoHandler`` methods named above.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

PATCHES = {"moto": "5.2.5"}

WRITE_LOCK = threading.RLock()
_WRITES = ("put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item")
# Reads take the same lock, so none sees a transaction half-committed. TransactGetItems is read item
# by item by moto's request handler: it is locked there, so a transaction cannot commit between two.
_READS = ("get_item", "query", "scan")


def _locked(method: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with WRITE_LOCK:
            return method(*args, **kwargs)

    wrapper.__wrapped__ = method  # type: ignore[attr-defined]
    return wrapper


def install() -> Callable[[], None]:
    """Install patch 3 around the methods as they are now (patch 2's ``transact_write_items`` when it
    is installed first); returns a function that removes it."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.responses import DynamoHandler

    originals: list[tuple[type, str, Callable[..., Any]]] = [
        (DynamoDBBackend, name, getattr(DynamoDBBackend, name)) for name in _WRITES + _READS
    ]
    originals.append((DynamoHandler, "transact_get_items", DynamoHandler.transact_get_items))
    for cls, name, method in originals:
        setattr(cls, name, _locked(method))

    def remove() -> None:
        for cls, name, method in originals:
            setattr(cls, name, method)

    return remove
