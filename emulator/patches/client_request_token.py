"""TransactWriteItems' ClientRequestToken honoured: a retry of a committed transaction succeeds (patch 11).

moto's behaviour: ``DynamoHandler.transact_write_items`` (moto/dynamodb/responses.py) ignores
``ClientRequestToken``, which botocore fills in on every call (an idempotency token in the service
model) and keeps across its retries. A retry of a transaction that committed but whose reply was lost
runs the transaction again: it fails its own conditions (``TransactionCanceledException``), or, without
conditions, applies twice.

AWS's behaviour: "Providing a ClientRequestToken makes the call to TransactWriteItems idempotent": for
10 minutes after the first call completed, the same token with the same parameters succeeds without
applying anything again, and with other parameters DynamoDB answers
``IdempotentParameterMismatchException``
(https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html,
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html). The patch keeps,
for 10 minutes after each successful call, its token and a digest of its parameters, under patch 3's
``WRITE_LOCK`` so a retry racing its original waits for it.

Upstream: yes. botocore sends a token on every call and retries with it, so every moto user's retried
transaction can fail where AWS succeeds; the fix is a small map in the backend.
``docs/upstream/client_request_token.md``.

Patches: moto 5.2.5, ``DynamoHandler.transact_write_items``.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from emulator.patches.dynamodb_lock import WRITE_LOCK

PATCHES = {"moto": "5.2.5"}

CLIENT_TOKEN_SECONDS = 600  # DynamoDB: a token is valid for 10 minutes after its first call completed
# ClientRequestToken -> (parameters digest, when it succeeded), oldest first (expired from the front).
_TOKENS: OrderedDict[str, tuple[str, float]] = OrderedDict()


def _idempotent_transact_write_items(original: Callable[..., Any]) -> Callable[..., Any]:
    """The handler's TransactWriteItems, honouring ClientRequestToken."""

    def transact_write_items(self: Any) -> Any:
        token = self.body.get("ClientRequestToken")
        if not token:
            return original(self)
        parameters = {k: v for k, v in self.body.items() if k != "ClientRequestToken"}
        digest = hashlib.sha256(json.dumps(parameters, sort_keys=True).encode()).hexdigest()
        with WRITE_LOCK:
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


def install() -> Callable[[], None]:
    """Install patch 11; returns a function that removes it."""
    from moto.dynamodb.responses import DynamoHandler

    original = DynamoHandler.transact_write_items
    DynamoHandler.transact_write_items = _idempotent_transact_write_items(original)  # type: ignore[method-assign]

    def remove() -> None:
        DynamoHandler.transact_write_items = original  # type: ignore[method-assign]

    return remove
