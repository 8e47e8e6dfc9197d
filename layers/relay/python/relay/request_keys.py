"""A client's ``Idempotency-Key`` (the HTTP header): the same key and body name the same entity.

One write accepts a request: the entity's id derives from the caller and the key (``derived_id``), so
the entity's own conditional PutItem refuses a second acceptance, and the failed condition's ALL_OLD
(``EntityExists``) answers the retry (``same_request``): the same body -> the same entity, answered
again without a second write; a different body -> ``IdempotencyKeyMismatch`` (the APIs answer 422,
naming both hashes), nothing stored. The entity records its request's sha256 for that.

Keys bound before the one-write layout are items in the idempotency table (``id =
request-key#<key>``, the entity's id under its own attribute name, ``requestSha256``, TTL
``expiresAt``); a stage upgraded from that layout still reads them (``RequestKeys.replayed``) until
their TTL has passed.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from relay.ddb import deserialize_item
from relay.envelope import canonical_json

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

KIND = "request-key"


def request_key_id(idempotency_key: str) -> str:
    return f"{KIND}#{idempotency_key}"


def derived_id(namespace: uuid.UUID, caller: str, idempotency_key: str) -> str:
    """The entity a caller's Idempotency-Key names (``namespace``: one per kind of entity): the same pair
    always gives the same id, and two callers who happen to choose the same key never share one."""
    return str(uuid.uuid5(namespace, json.dumps([caller, idempotency_key])))


class EntityExists(Exception):
    """The entity's id is taken: ``item`` is the entity as stored (the failed condition's ALL_OLD, empty
    when DynamoDB left it out), so a retry of its request is answered from it."""

    def __init__(self, item: Mapping[str, Any] | None) -> None:
        super().__init__("the entity exists")
        self.item = dict(item or {})


def stored_sha256(item: Mapping[str, Any]) -> str:
    """The request sha256 an entity item records (inline, or in its claim-check ref)."""
    return str(item.get("requestSha256") or (item.get("requestRef") or {}).get("sha256"))


def same_request(
    item: Mapping[str, Any],
    sha256: str,
    *,
    idempotency_key: str | None,
    entity_id: str,
    entity: str,
    retry_hint: str,
) -> None:
    """Accept the stored entity ``item`` as the answer to a request whose body hashes to ``sha256``:
    the same request's own write (its reply lost, the SDK retried it) or a client's retry with the same
    key and body. Another body under the key raises ``IdempotencyKeyMismatch``."""
    stored = stored_sha256(item)
    if stored != sha256:
        raise IdempotencyKeyMismatch(
            RequestKeyRecord(idempotency_key or "", entity_id, stored),
            entity=entity,
            received_sha256=sha256,
            retry_hint=retry_hint,
        )


def request_sha256(document: Any) -> str:
    """The sha256 of the request's canonical JSON (key order and spacing do not matter)."""
    return hashlib.sha256(canonical_json(document).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class RequestKeyRecord:
    """What a client's Idempotency-Key is bound to."""

    idempotency_key: str
    entity_id: str
    request_sha256: str


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

    def replayed(self, idempotency_key: str, sha256: str) -> RequestKeyRecord | None:
        """The binding of a key used before with this body, or None for a new key; a different body
        raises IdempotencyKeyMismatch."""
        record = self.get(idempotency_key)
        if record is not None and record.request_sha256 != sha256:
            raise IdempotencyKeyMismatch(
                record, entity=self.entity, received_sha256=sha256, retry_hint=self.retry_hint
            )
        return record
