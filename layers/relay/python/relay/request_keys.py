"""A client's ``Idempotency-Key`` (the HTTP header), bound to the entity its first request created.

Same key and same body -> the same entity, answered again without a second write. Same key and a
different body -> ``IdempotencyKeyMismatch`` (the APIs answer 422, naming both hashes), nothing
stored. The binding is written in the SAME transaction as the entity (``bind_write``), conditional
on the key being new: of two concurrent requests with one key exactly one commits, and the other
answers as the replay of the winner (``accept_once``).

Stored in the idempotency table beside the kernel's processed-event markers:
``id = request-key#<key>``, ``kind = request-key``, the entity's id under its own attribute name
(``operationId``, ``orderId``), ``requestSha256``, ``createdAt``, ``expiresAt`` (TTL).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from relay.envelope import canonical_json
from relay.errors import ConcurrentWrite
from relay.idempotency import BusinessWrite, deserialize_item, put
from relay.state_machine import now_iso

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

KIND = "request-key"


def request_key_id(idempotency_key: str) -> str:
    return f"{KIND}#{idempotency_key}"


def request_sha256(document: Any) -> str:
    """The sha256 of the request's canonical JSON (key order and spacing do not matter)."""
    return hashlib.sha256(canonical_json(document).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class RequestKeyRecord:
    """What a client's Idempotency-Key is bound to."""

    idempotency_key: str
    entity_id: str
    request_sha256: str


class RequestKeyTaken(Exception):
    """The Idempotency-Key was bound by a concurrent request that committed first; read it again."""


class IdempotencyKeyMismatch(Exception):
    """The Idempotency-Key is bound to an entity created from a different request body."""

    def __init__(
        self, record: RequestKeyRecord, *, entity: str, received_sha256: str, retry_hint: str
    ) -> None:
        super().__init__(
            f"Idempotency-Key {record.idempotency_key!r} was already used for {entity} {record.entity_id} "
            f"with a different request body (sha256 {record.request_sha256[:12]}… stored, "
            f"{received_sha256[:12]}… received); nothing was stored. Send the original body to get that "
            f"{entity} back, or use a new key for {retry_hint}."
        )
        self.entity_id = record.entity_id
        self.stored_sha256 = record.request_sha256
        self.received_sha256 = received_sha256


class RequestKeys:
    """The bindings of one service: ``entity`` names what a key creates in messages ("operation"),
    ``id_attribute`` is the stored attribute holding its id ("operationId")."""

    def __init__(
        self, *, table_name: str, ddb_client: DynamoDBClient, entity: str, id_attribute: str, retry_hint: str
    ) -> None:
        self.table_name = table_name
        self.ddb = ddb_client
        self.entity = entity
        self.id_attribute = id_attribute
        self.retry_hint = retry_hint

    def get(self, idempotency_key: str) -> RequestKeyRecord | None:
        item = self.ddb.get_item(
            TableName=self.table_name,
            Key={"id": {"S": request_key_id(idempotency_key)}},
            ConsistentRead=True,
        ).get("Item")
        if not item:
            return None
        plain = deserialize_item(item)
        return RequestKeyRecord(idempotency_key, str(plain[self.id_attribute]), str(plain["requestSha256"]))

    def bind_write(
        self, idempotency_key: str, entity_id: str, sha256: str, *, ttl_days: int, now: datetime | None = None
    ) -> BusinessWrite:
        """The conditional Put that binds a new key (raises RequestKeyTaken from the transaction when a
        concurrent request bound it first). Goes into the entity's own creation transaction."""
        created = now or datetime.now(UTC)
        return put(
            self.table_name,
            {
                "id": request_key_id(idempotency_key),
                "kind": KIND,
                self.id_attribute: entity_id,
                "requestSha256": sha256,
                "createdAt": now_iso(created),
                "expiresAt": int((created + timedelta(days=ttl_days)).timestamp()),
            },
            "attribute_not_exists(id)",
            on_condition_failed=lambda _old: RequestKeyTaken(idempotency_key),
        )

    def replayed(self, idempotency_key: str, sha256: str) -> RequestKeyRecord | None:
        """The binding of a key used before with this body, or None for a new key; a different body
        raises IdempotencyKeyMismatch."""
        record = self.get(idempotency_key)
        if record is not None and record.request_sha256 != sha256:
            raise IdempotencyKeyMismatch(
                record, entity=self.entity, received_sha256=sha256, retry_hint=self.retry_hint
            )
        return record

    def accept_once[R](
        self,
        idempotency_key: str | None,
        sha256: str,
        *,
        ttl_days: int,
        create: Callable[[Binding], R],
        replay: Callable[[RequestKeyRecord], R],
    ) -> R:
        """Create the entity once per key. ``create`` gets a ``bind(entity_id)`` that returns the writes
        to commit in the entity's own transaction (none without a key); a key used before with this
        body answers ``replay`` of its binding instead."""
        if idempotency_key is None:
            return create(lambda _entity_id: [])
        record = self.replayed(idempotency_key, sha256)
        if record is not None:
            return replay(record)
        key = idempotency_key
        try:
            return create(lambda entity_id: [self.bind_write(key, entity_id, sha256, ttl_days=ttl_days)])
        except RequestKeyTaken:
            # A concurrent request with the same key committed first and ours wrote nothing: answer as
            # the replay of the winner.
            record = self.replayed(key, sha256)
            if record is None:  # the binding vanished between the two reads (TTL): the client retries
                raise ConcurrentWrite("Idempotency-Key binding changed concurrently; retry") from None
            return replay(record)


Binding = Callable[[str], list[BusinessWrite]]
"""``bind(entity_id)``: the writes that bind the request's key to the entity (empty without a key)."""
