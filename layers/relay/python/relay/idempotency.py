"""Transactional idempotency: the processed-event marker and the business writes in ONE transaction.

``commit_once(envelope, writes, table_name=...)`` sends exactly one ``TransactWriteItems``:

* item 0, the marker ``{id: "event#<eventId>", kind: "processed-event", eventId, payloadSha256,
  eventType, processedAt, expiresAt}``, guarded by ``attribute_not_exists(id)``;
* items 1..n, the caller's (conditional) business writes.

Either all of it commits or none of it does, so "processed" can never be recorded without the
effect, nor the effect applied twice. Check-then-write would not do: two consumers holding the same
message (visibility lapsed, SNS duplicate) can both see "not processed" before either writes.

When the transaction is cancelled, the cancellation reasons (with ``ALL_OLD`` items) say why, so
no second request is needed:

* marker condition failed, same payload hash -> DUPLICATE (acknowledge, no effect);
* marker condition failed, different hash -> PayloadConflict (permanent, metric + log);
* a business condition failed -> the caller's own error (``on_condition_failed``) or
  BusinessConditionFailed; the marker is not written, so a corrected retry can still apply;
* TransactionConflict / throttling -> DependencyUnavailable (transient).

The idempotency table (one per service) has partition key ``id`` (S) and TTL attribute
``expiresAt``; Powertools idempotency shares it (see relay.side_effects).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

from relay.clients import default_client
from relay.ddb import BusinessWrite, deserialize_item, error_code, serialize_item, with_all_old
from relay.envelope import Envelope, canonical_payload_sha256
from relay.errors import (
    BusinessConditionFailed,
    DependencyUnavailable,
    PayloadConflict,
    classify_cancellation_reason,
)
from relay.observability import logger, record_metric

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

MARKER_KIND = "processed-event"
DEFAULT_TTL_SECONDS = 7 * 86_400
# TransactWriteItems takes at most 100 items; the marker uses one.
MAX_BUSINESS_WRITES = 99


class CommitResult(enum.Enum):
    APPLIED = "APPLIED"
    DUPLICATE = "DUPLICATE"


def marker_id(event_id: str) -> str:
    return f"event#{event_id}"


def commit_once(
    envelope: Envelope,
    writes: Sequence[BusinessWrite | Mapping[str, Any]],
    *,
    table_name: str,
    ddb_client: DynamoDBClient | None = None,
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
    now: datetime | None = None,
) -> CommitResult:
    """Apply ``writes`` once per ``envelope.event_id`` (exactly one DynamoDB request)."""
    business = [w if isinstance(w, BusinessWrite) else BusinessWrite(w) for w in writes]
    if len(business) > MAX_BUSINESS_WRITES:
        raise ValueError(
            f"{len(business)} writes: a transaction holds at most {MAX_BUSINESS_WRITES} + the marker"
        )
    client = ddb_client if ddb_client is not None else default_client("dynamodb")
    moment = now or datetime.now(UTC)
    received_hash = canonical_payload_sha256(envelope)
    marker = {
        "Put": {
            "TableName": table_name,
            "Item": serialize_item(
                {
                    "id": marker_id(envelope.event_id),
                    "kind": MARKER_KIND,
                    "eventId": envelope.event_id,
                    "eventType": envelope.event_type,
                    "payloadSha256": received_hash,
                    "processedAt": moment.astimezone(UTC).isoformat().replace("+00:00", "Z"),
                    "expiresAt": int(moment.timestamp()) + int(ttl_seconds),
                }
            ),
            "ConditionExpression": "attribute_not_exists(id)",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }
    items: list[dict[str, Any]] = [marker] + [with_all_old(w.transact_item) for w in business]
    # No ClientRequestToken on purpose: DynamoDB rejects a reused token whose parameters differ
    # (processedAt changes per attempt), and a retried request whose first attempt did commit is
    # already recognised by the marker as a DUPLICATE with the same hash.
    try:
        client.transact_write_items(TransactItems=cast("list[TransactWriteItemTypeDef]", items))
    except Exception as exc:
        if error_code(exc) != "TransactionCanceledException":
            raise  # classified by the consumer (relay.errors.classify)
        return _explain_cancellation(exc, envelope, business, received_hash, table_name, client)
    return CommitResult.APPLIED


def already_processed(envelope: Envelope, *, table_name: str, ddb_client: DynamoDBClient) -> bool:
    """Whether this event's processed-event marker exists: a cheap early exit for a redelivery, before
    any read or call. It compares the payload hash the marker recorded, so a conflicting replay (same
    eventId, other content) is a ``PayloadConflict`` here too -- the transaction would catch it, but an
    early exit that only looked for the marker would acknowledge it as a plain duplicate. Correctness
    never depends on it: the marker commits in the same transaction as the effect (``commit_once``)."""
    item = ddb_client.get_item(
        TableName=table_name,
        Key={"id": {"S": marker_id(envelope.event_id)}},
        ConsistentRead=True,
        ProjectionExpression="id, payloadSha256",
    ).get("Item")
    if not item:
        return False
    stored = str(deserialize_item(item).get("payloadSha256", ""))
    received = canonical_payload_sha256(envelope)
    if stored and stored != received:
        raise payload_conflict(envelope, stored, received)
    return True


def payload_conflict(envelope: Envelope, stored_sha256: str, received_sha256: str) -> PayloadConflict:
    """The same eventId seen again with another payload: counted (metric, alarmed), logged with both
    hashes, and returned for the caller to raise (never applied)."""
    record_metric("PayloadConflict", event_type=envelope.event_type)
    logger().error(
        "payload conflict",
        extra={
            "event_id": envelope.event_id,
            "stored_sha256": stored_sha256,
            "received_sha256": received_sha256,
        },
    )
    return PayloadConflict(
        f"event {envelope.event_id} was already processed with a different payload "
        f"(sha256 {stored_sha256[:12]}… stored, {received_sha256[:12]}… received); not applied. "
        "Investigate the producer."
    )


def _explain_cancellation(
    exc: Exception,
    envelope: Envelope,
    business: Sequence[BusinessWrite],
    received_hash: str,
    table_name: str,
    client: DynamoDBClient,
) -> CommitResult:
    response: dict[str, Any] = getattr(exc, "response", {}) or {}
    reasons: list[dict[str, Any]] = list(response.get("CancellationReasons") or [])
    if not reasons:
        raise DependencyUnavailable(
            f"DynamoDB cancelled the transaction for event {envelope.event_id} without reasons; retrying."
        ) from exc
    # The marker first: for a duplicate, business conditions usually fail too (the first delivery
    # already moved the state on), and that must read as "duplicate", not as a business error.
    if reasons[0].get("Code") == "ConditionalCheckFailed":
        stored_item = reasons[0].get("Item")
        if stored_item is None:
            # Only if DynamoDB omitted ALL_OLD: read the marker (a second request, rare path).
            stored_item = client.get_item(
                TableName=table_name, Key={"id": {"S": marker_id(envelope.event_id)}}, ConsistentRead=True
            ).get("Item")
        stored_hash = str(deserialize_item(stored_item or {}).get("payloadSha256", ""))
        if stored_hash == received_hash:
            record_metric("Duplicate", event_type=envelope.event_type)
            logger().info(
                "duplicate event acknowledged without effect", extra={"event_id": envelope.event_id}
            )
            return CommitResult.DUPLICATE
        raise payload_conflict(envelope, stored_hash, received_hash) from exc

    for index, reason in enumerate(reasons[1:], start=1):
        code = reason.get("Code")
        if code in (None, "None"):
            continue
        write = business[index - 1]
        if code == "ConditionalCheckFailed":
            old = deserialize_item(reason["Item"]) if reason.get("Item") else None
            if write.on_condition_failed is not None:
                raise write.on_condition_failed(old) from exc
            table, key = _describe_target(write)
            raise BusinessConditionFailed(
                f"condition of {write.operation} on {table} {key} failed for event {envelope.event_id}; "
                "nothing was written (no marker either). The item is not in the state this event expects."
            ) from exc
        raise classify_cancellation_reason(index, reason, table=_describe_target(write)[0]) from exc
    marker_code = reasons[0].get("Code")
    raise classify_cancellation_reason(0, reasons[0], table=f"{table_name} (marker {marker_code})") from exc


def _describe_target(write: BusinessWrite) -> tuple[str, str]:
    body = write.body
    key = body.get("Key") or {}
    if not key and "Item" in body:
        key = {k: v for k, v in body["Item"].items() if k in ("id", "pk", "sk", "PK", "SK")}
    return str(body.get("TableName", "?")), str(deserialize_item(key) if key else "{}")
