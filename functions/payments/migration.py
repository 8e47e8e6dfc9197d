"""Payments operations of an older layout, rewritten into today's (``ops migrate``).

An operation written before one write per step has no ``seen`` map, its steps as maps, and its deadline
in the ``by-deadline`` index. Today's code converts such an operation at its next transition
(``OperationStore.transition_write``: ``seen``, the ``due`` index, the old index attributes removed);
the migration makes the same conversion at once, for every operation, with ONE conditional UpdateItem
on the version read, so it never overwrites a step's write (a step that wrote in between fails the
condition; the driver reads the item again).

Processed-event markers (``event#<eventId>`` in the idempotency table): the one that matters is the
marker of the event an operation still in ``PAYMENT_PROCESSING`` last processed (its PaymentRequested,
or its latest status check), because the payment step runs from that state: a redelivery of it must
stay a duplicate. The event ids are deterministic (``relay.envelope.build_event_id``), so the
migration looks those markers up and folds the latest one found into ``seen`` (eventId -> payload
hash, as a step records it). In any other state a redelivered old event fails its step's
status-and-version condition, learns what happened from ``ALL_OLD`` and is acknowledged without a
second effect. The markers expire by their TTL (7 days). The request's claim
check (``requestRef``) stays: today's layout reads a ref as well as an inline request.

Today's operations without ``schemaVersion`` (written before it existed) are only stamped.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from payments.operations import Status
from payments.store import _step_to_item, operation_id_of, operation_key
from payments.subscriptions import PAYMENT_REQUESTED, PAYMENT_STATUS_CHECK_DUE
from relay import deadlines, entity_events
from relay.ddb import apply_write, deserialize_item
from relay.envelope import build_event_id
from relay.expressions import Condition, Update
from relay.idempotency import marker_id

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# The shard and deadline of the index of the layout before one write per step (``by-deadline``).
OLDER_INDEX = ("deadlineShard", "deadlineAt")
MIGRATED = "migrated"
STAMPED = "stamped"
MOVED_ON = "moved on"  # a step wrote meanwhile: read again


class _MovedOn(Exception):
    """The operation changed since it was read."""


def _moved_on(_old: Any) -> Exception:
    return _MovedOn()


def is_older(item: Mapping[str, Any]) -> bool:
    """An operation item of the layout before one write per step."""
    return (
        not entity_events.has_seen_map(item)
        or any(isinstance(step, Mapping) for step in item.get("steps") or [])
        or any(name in item for name in OLDER_INDEX)
    )


def _candidates(item: Mapping[str, Any]) -> list[str]:
    """The ids of the events an operation in PAYMENT_PROCESSING may have processed last, oldest first."""
    if item.get("status") != str(Status.PAYMENT_PROCESSING):
        return []
    operation_id = operation_id_of(item)
    ids = [build_event_id(PAYMENT_REQUESTED, operation_id, "payment-requested")]
    attempts = int(item.get("attempts") or 0)
    ids += [
        build_event_id(PAYMENT_STATUS_CHECK_DUE, operation_id, f"payment-check-{n}")
        for n in range(1, attempts + 2)
    ]
    return ids


def last_processed(ddb: DynamoDBClient, idempotency_table: str, item: Mapping[str, Any]) -> dict[str, str]:
    """``seen`` as a step would have left it: the latest candidate with a processed-event marker."""
    for event_id in reversed(_candidates(item)):
        marker = ddb.get_item(
            TableName=idempotency_table,
            Key={"id": {"S": marker_id(event_id)}},
            ConsistentRead=True,
            ProjectionExpression="payloadSha256",
        ).get("Item")
        if marker:
            return {event_id: deserialize_item(marker)["payloadSha256"][: entity_events.HASH_DIGITS]}
    return {}


def migrate_operation(
    ddb: DynamoDBClient,
    *,
    operations_table: str,
    idempotency_table: str,
    item: Mapping[str, Any],
    deadline_shards: int = deadlines.DEFAULT_SHARDS,
    dry_run: bool,
) -> str:
    """Today's layout for one operation of the layout before (see the module docstring)."""
    if dry_run:
        return "would migrate"
    operation_id = operation_id_of(item)
    change = Update().set(entity_events.SCHEMA_VERSION_ATTRIBUTE, entity_events.SCHEMA_VERSION)
    if not entity_events.has_seen_map(item):
        change.set(entity_events.SEEN_ATTRIBUTE, last_processed(ddb, idempotency_table, item))
    steps = item.get("steps") or []
    if any(isinstance(step, Mapping) for step in steps):
        change.set("steps", [_step_to_item(step) if isinstance(step, Mapping) else step for step in steps])
    older_at = item.get(OLDER_INDEX[1])
    if any(name in item for name in OLDER_INDEX):
        change.remove(*OLDER_INDEX)
    if older_at is not None and item.get(deadlines.AT_ATTRIBUTE) is None:
        # The same deadline, in the index the sweeper reads now.
        moment = datetime.fromtimestamp(int(older_at), UTC)
        for name, value in deadlines.deadline_attributes(operation_id, moment, deadline_shards).items():
            change.set(name, value)
    return _write(ddb, operations_table, operation_id, item, change, MIGRATED)


def stamp(ddb: DynamoDBClient, *, operations_table: str, item: Mapping[str, Any], dry_run: bool) -> str:
    """``schemaVersion`` on an operation already in today's layout."""
    if dry_run:
        return "would stamp"
    change = Update().set(entity_events.SCHEMA_VERSION_ATTRIBUTE, entity_events.SCHEMA_VERSION)
    return _write(ddb, operations_table, operation_id_of(item), item, change, STAMPED)


def _write(
    ddb: DynamoDBClient, table: str, operation_id: str, item: Mapping[str, Any], change: Update, done: str
) -> str:
    condition = (
        Condition().equals(version=int(item["version"])).not_exists(entity_events.SCHEMA_VERSION_ATTRIBUTE)
    )
    write = change.write(
        table, operation_key(operation_id), condition=condition, on_condition_failed=_moved_on
    )
    try:
        apply_write(write, ddb_client=ddb)
    except _MovedOn:
        return MOVED_ON
    return done
