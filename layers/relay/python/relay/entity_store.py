"""The data access every service's entity store shares (an operation, an order): the entity table
(the entity's item), the idempotency table (client Idempotency-Keys of the layout before) and one
DynamoDB client. A service's store subclasses it and adds what only it
knows: key shapes, attribute names, the entity's own writes.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from relay import entity_events
from relay.ddb import BusinessWrite, apply_write, apply_writes, deserialize_item, put, serialize_item
from relay.request_keys import EntityExists, RequestKeys, derived_id, same_request

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from relay.envelope import Envelope


class EntityStore:
    ENTITY: ClassVar[str]
    """What the entity is called in messages ("operation", "order")."""
    ID_ATTRIBUTE: ClassVar[str]
    """The attribute holding its id ("operationId")."""
    NEW_ONE: ClassVar[str]
    """What a client asks for with a new Idempotency-Key ("a new payment")."""
    ID_NAMESPACE: ClassVar[uuid.UUID]
    """The uuid5 namespace of the ids derived from (caller, Idempotency-Key); never change it: a
    client's retry after the change would create a second entity."""

    def __init__(self, *, table_name: str, idempotency_table: str | None, ddb_client: DynamoDBClient) -> None:
        """``idempotency_table`` may be None for a function that never dedupes (a sweeper): then the
        marker and request-key methods refuse with a clear error instead of calling DynamoDB."""
        self.table_name = table_name
        self._idempotency_table = idempotency_table
        self.ddb = ddb_client

    @property
    def idempotency_table(self) -> str:
        if not self._idempotency_table:
            raise RuntimeError(
                f"this {self.ENTITY} store has no idempotency table (the function's settings do not "
                "name one); markers and request keys are not available here"
            )
        return self._idempotency_table

    @functools.cached_property
    def request_keys(self) -> RequestKeys:
        return RequestKeys(
            table_name=self.idempotency_table,
            ddb_client=self.ddb,
            entity=self.ENTITY,
            id_attribute=self.ID_ATTRIBUTE,
            retry_hint=self.NEW_ONE,
        )

    def new_id(self, caller: str, idempotency_key: str | None) -> str:
        """The id of the entity a request creates: derived from the caller and the key
        (``relay.request_keys.derived_id``), random without a key."""
        if idempotency_key is None:
            return str(uuid.uuid4())
        return derived_id(self.ID_NAMESPACE, caller, idempotency_key)

    def existing(
        self,
        exists: EntityExists,
        key: Mapping[str, Any],
        *,
        sha256: str,
        idempotency_key: str | None,
        entity_id: str,
    ) -> dict[str, Any]:
        """The stored entity that refused a creation (its ALL_OLD, read only if DynamoDB left it out),
        when it was created from the same request (``relay.request_keys.same_request``)."""
        stored = exists.item or self.read(key) or {}
        same_request(
            stored,
            sha256,
            idempotency_key=idempotency_key,
            entity_id=entity_id,
            entity=self.ENTITY,
            retry_hint=self.NEW_ONE,
        )
        return stored

    def read(self, key: Mapping[str, Any]) -> dict[str, Any] | None:
        """One item of the entity table, read consistently: the consumers decide what to do from the
        state they read, and a stale read would only cost a failed conditional write -- consistent
        reads make that rare."""
        item = self.ddb.get_item(TableName=self.table_name, Key=serialize_item(key), ConsistentRead=True).get(
            "Item"
        )
        return deserialize_item(item) if item else None

    def apply(self, writes: Sequence[BusinessWrite]) -> None:
        """One transaction without a processed-event marker (an API request)."""
        apply_writes(writes, ddb_client=self.ddb)

    def apply_one(self, write: BusinessWrite) -> None:
        """One write without a marker as a plain conditional write (``relay.ddb.apply_write``:
        half a transaction's write units; its ``on_condition_failed`` must recognise its own write)."""
        apply_write(write, ddb_client=self.ddb)

    def create(self, item: dict[str, Any], event: Envelope, held: Mapping[str, str]) -> None:
        """ONE conditional PutItem of a new entity with its first event inside it (published from the
        stream; without the ids in ``held``, which the item holds). Raises ``EntityExists`` with the
        stored entity when its id is taken."""
        item[entity_events.EVENTS_ATTRIBUTE] = [entity_events.compact(event, held)]
        self.apply_one(
            put(self.table_name, item, "attribute_not_exists(pk)", on_condition_failed=EntityExists)
        )
