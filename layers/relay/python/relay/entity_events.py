"""One write per step: the entity item is its own processed-event marker and its own outbox.

A step that changes ONE entity item (an operation, an order) commits with ONE conditional UpdateItem:

* the condition is the state and version the step read (``relay.state_machine``);
* the update records the processed eventId and its payload hash in the item (``seen``: the last
  processed eventId -> the first 16 hex digits of ``canonical_payload_sha256``) and writes the
  events the step produces into the item (``ev``: their envelopes with one-letter keys, replacing the
  previous step's);
* ``ReturnValuesOnConditionCheckFailure=ALL_OLD`` (``relay.ddb.apply_write``), so a
  duplicate or stale delivery learns what happened from the failed condition, without a second read
  (``explain_seen``).

The table's stream publisher publishes the events that a write ADDED to ``ev`` (``new_events``:
in the NEW image, not in the OLD one) with PublishBatch; nothing is marked per event. A crash between
the write and the publish loses nothing: the stream retries the record, and once its retries are
spent the item is still overdue in the deadline index, where the sweeper re-publishes from the item
(``events_in``). An item that ENDED (it carries its TTL, ``expiresAt``) stays in the deadline index
until its last events are published: the publisher then removes it (``settle_write``), the one write
that marks anything.

Where a step changes several items (stock across SKUs, a ledger and a balance), the kernel's
``relay.idempotency.commit_once`` transaction with a separate marker is still the tool.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from relay.ddb import BusinessWrite
from relay.envelope import Envelope, canonical_payload_sha256
from relay.expressions import Condition, Update
from relay.idempotency import payload_conflict

EVENTS_ATTRIBUTE = "ev"
SEEN_ATTRIBUTE = "seen"
# Which layout an entity item is in. 2: one write per step (``seen`` and ``ev`` in the item); an item
# without it was written before (``ops migrate`` rewrites it, ``ops doctor`` counts what is left).
SCHEMA_VERSION_ATTRIBUTE = "schemaVersion"
SCHEMA_VERSION = 2
# 64 bits of the payload's sha256: enough to tell a conflicting replay from a duplicate (a collision
# would need 2^32 different payloads under one eventId), at a quarter of the bytes of the full hash.
HASH_DIGITS = 16
# How long an item's ended state waits before its TTL; the item's TTL attribute marks "ended".
ENDED_ATTRIBUTE = "expiresAt"


def payload_hash(envelope: Envelope) -> str:
    return canonical_payload_sha256(envelope)[:HASH_DIGITS]


def record(
    update: Update,
    cause: Envelope | None,
    events: Sequence[Envelope],
    held: Mapping[str, str] | None = None,
) -> Update:
    """Add to ``update`` what a step records in the entity: the processed ``cause`` (its eventId and
    payload hash) and the ``events`` it produces (replacing the previous step's; none removes them).
    ``held``: what the item holds that its events need not repeat (``compact``)."""
    if cause is not None:
        # The last processed event only: an older one's redelivery finds the entity past the step
        # it asked for (its state says so), so the map need not grow with every step.
        update.set(SEEN_ATTRIBUTE, {cause.event_id: payload_hash(cause)})
    if events:
        update.set(EVENTS_ATTRIBUTE, [compact(event, held) for event in events])
    else:
        update.remove(EVENTS_ATTRIBUTE)
    return update


def record_cause(update: Update, condition: Condition, cause: Envelope | None) -> None:
    """For a write that is not a transition (no version to condition on): record ``cause`` and
    require that it was not recorded yet, so of two deliveries of one event only one writes."""
    if cause is None:
        return
    update.set(SEEN_ATTRIBUTE, {cause.event_id: payload_hash(cause)})
    condition.not_exists_in(SEEN_ATTRIBUTE, cause.event_id)


def seen(item: Mapping[str, Any] | None, envelope: Envelope) -> bool:
    """Whether the entity already processed ``envelope``: True for a duplicate (same payload), False
    for a new event. The same eventId with another payload is a ``PayloadConflict`` (permanent:
    parked, metric + alarm), never applied."""
    return seen_in((item or {}).get(SEEN_ATTRIBUTE), envelope)


def seen_in(recorded_events: Mapping[str, Any] | None, envelope: Envelope) -> bool:
    """``seen`` on the map an entity read from its ``seen`` attribute holds."""
    recorded = (recorded_events or {}).get(envelope.event_id)
    if recorded is None:
        return False
    received = payload_hash(envelope)
    if str(recorded) == received:
        return True
    raise payload_conflict(envelope, str(recorded), received)


def has_seen_map(item: Mapping[str, Any] | None) -> bool:
    """Whether the item records its processed events (an item written before the one-write layout
    does not: its markers are in the idempotency table)."""
    return isinstance((item or {}).get(SEEN_ATTRIBUTE), Mapping)


# An event as the item holds it: its envelope's JSON with one-letter keys, and the version left out
# when it is 1.0 -- the field names alone would be a tenth of a 1 KB item.
_SHORT = {
    "eventId": "i",
    "eventType": "t",
    "eventVersion": "v",
    "occurredAt": "o",
    "correlationId": "c",
    "causationId": "a",
    "ids": "d",
    "payload": "p",
    "claimCheck": "k",
    "traceparent": "r",
}
_LONG = {short: name for name, short in _SHORT.items()}
# The names an event left out because its item holds them (``held``), space-separated: an id's name,
# or "c" for the correlation id; with a trailing "#" when the item holds it as the id in its key.
_HELD = "x"
_CORRELATION = "correlationId"
_KEY = "#"


def _plain(value: Any) -> Any:
    return value.get("S") if isinstance(value, Mapping) else value


def _read_back(item: Mapping[str, Any], form: str) -> str | None:
    name = form.removesuffix(_KEY)
    name = _CORRELATION if name == "c" else name
    if not form.endswith(_KEY):
        value = _plain(item.get(name))
        return value if isinstance(value, str) else None
    key = _plain(item.get("pk"))
    return key.split("#", 1)[1] if isinstance(key, str) and "#" in key else None


def held_values(item: Mapping[str, Any], names: Sequence[str]) -> dict[str, str]:
    """What ``item`` holds of ``names`` (ids, or ``correlationId``), for ``compact``: its attribute of
    that name, else -- named ``<name>#`` -- the id in its key (``pk`` is ``KIND#<id>``). Plain values
    or DynamoDB JSON, the same way ``expand`` reads them back."""
    held: dict[str, str] = {}
    for name in names:
        for form in (name, name + _KEY):
            value = _read_back(item, form)
            if value is not None:
                held[form] = value
                break
    return held


def compact(envelope: Envelope, held: Mapping[str, str] | None = None) -> str:
    """``envelope`` as the item holds it. The ids (and the correlation id) whose value the item
    already holds -- ``held``, from ``held_values`` -- are left out and named in ``x``: a payment's
    operationId, paymentId and orderId would be a sixth of a 1 KB item."""
    document = envelope.to_dict()
    if document.get("eventVersion") == "1.0":
        del document["eventVersion"]
    left_out: list[str] = []

    def holds(name: str, value: Any) -> str | None:
        for form in (name, name + _KEY):
            if (held or {}).get(form) == value:
                return form
        return None

    ids = dict(document.get("ids") or {})
    for name, value in list(ids.items()):
        form = holds(name, value)
        if form is not None:
            del ids[name]
            left_out.append(form)
    if ids:
        document["ids"] = ids
    else:
        document.pop("ids", None)
    form = holds(_CORRELATION, document.get("correlationId"))
    if form is not None:
        del document["correlationId"]
        left_out.append(form.replace(_CORRELATION, "c"))
    short = {_SHORT[k]: v for k, v in document.items()}
    if left_out:
        short[_HELD] = " ".join(left_out)
    return json.dumps(short, separators=(",", ":"), ensure_ascii=False)


def expand(text: str, item: Mapping[str, Any] | None = None) -> Envelope:
    """An event as stored by ``compact`` (or a whole envelope's JSON), with what it left out read
    back from the ``item`` it is in (plain values or DynamoDB JSON)."""
    document = json.loads(text)
    if "eventId" in document:
        return Envelope.from_dict(document)
    expanded = {_LONG[k]: v for k, v in document.items() if k in _LONG}
    expanded.setdefault("eventVersion", "1.0")
    ids: dict[str, Any] = {}
    for form in str(document.get(_HELD) or "").split():
        value = _read_back(item or {}, form)
        name = form.removesuffix(_KEY)
        if value is None:
            raise ValueError(f"event {expanded.get('eventId')} leaves {name} to its item, which holds none")
        if name == "c":
            expanded["correlationId"] = value
        else:
            ids[name] = value
    if ids:  # the held ids first: they came first in every event that left them out
        expanded["ids"] = {**ids, **(expanded.get("ids") or {})}
    return Envelope.from_dict(expanded)


def events_in(image: Mapping[str, Any] | None) -> list[Envelope]:
    """The events an item holds (plain attribute values, as a read or ALL_OLD returns them)."""
    return [expand(str(text), image) for text in (image or {}).get(EVENTS_ATTRIBUTE) or []]


def _stream_strings(image: Mapping[str, Any]) -> list[str]:
    value = (image or {}).get(EVENTS_ATTRIBUTE) or {}
    return [str(entry.get("S")) for entry in value.get("L") or [] if isinstance(entry, Mapping)]


def new_events(record: Mapping[str, Any]) -> list[Envelope]:
    """The events a stream record's write added to the item: in its NEW image and not in its OLD one
    (an update that leaves ``ev`` alone publishes nothing again). DynamoDB JSON images."""
    if record.get("eventName") not in ("INSERT", "MODIFY"):
        return []
    data = record.get("dynamodb") or {}
    old = set(_stream_strings(data.get("OldImage") or {}))
    image = data.get("NewImage") or {}
    return [expand(text, image) for text in _stream_strings(image) if text not in old]


def settle_write(
    table_name: str, key: Mapping[str, Any], index_attributes: Sequence[str], version: int
) -> BusinessWrite:
    """Take an ended item out of the deadline index once its last events are published: a REMOVE of
    the index attributes, only while the item is still that ended version (never re-create a deleted
    item, never touch a newer one)."""
    return (
        Update()
        .remove(*index_attributes)
        .write(
            table_name,
            key,
            condition=Condition().exists(ENDED_ATTRIBUTE).equals(version=version),
            on_condition_failed=lambda _old: _Settled(),
        )
    )


class _Settled(Exception):
    """The ended item is gone or changed: nothing to take out of the index."""


def is_settled_error(exc: BaseException) -> bool:
    return isinstance(exc, _Settled)


def image_value(image: Mapping[str, Any], name: str) -> Any:
    """A scalar attribute of a stream image (DynamoDB JSON), or None."""
    value = image.get(name)
    if not isinstance(value, Mapping) or not value:
        return None
    kind, raw = next(iter(value.items()))
    return int(raw) if kind == "N" else raw
