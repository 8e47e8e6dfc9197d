"""The steps' shared skeleton: what every consumer step does before and around its one write.

A step (payments' payment, post-processing and invoice steps; orders' inventory, paid-orders,
failed-payments and shipping steps; loyalty's accrual and reversal) goes the same way:

1. ``expect``: the event is one this consumer handles, and names the entity (``ids.<name>``), or it
   is ``InvalidInput`` (parked: a filter policy or a producer is wrong);
2. ``load``: the entity it names, or ``UnknownEntity`` (parked: retrying will not create it);
3. ``duplicate``: the entity records the event as processed (``relay.entity_events.seen``; the same
   eventId with another payload is a ``PayloadConflict``), and the step ``acknowledge``\\ s it without
   effect -- as it does a step already done;
4. the decision, which is the service's own;
5. ``commit``: ONE write (or one transaction where several items move), conditional on what was read;
   a failed condition that shows the step done (``already``) is acknowledged too.

The steps decide; the stores own tables, clients and how writes are assembled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from relay.entity_events import seen_in
from relay.envelope import Envelope
from relay.errors import InvalidInput, PermanentError
from relay.observability import logger, record_metric
from relay.state_machine import AlreadyApplied

type Clock = Callable[[], datetime]
"""What a step reads the time from: its wiring's ``clock`` (``utc_now`` in a function; a test passes
its own). A step reads it once, at its entry, and passes the moment down: never ``datetime.now``."""


def utc_now() -> datetime:
    """The wall clock, in UTC: the ``Clock`` a deployed function is wired with."""
    return datetime.now(UTC)


class UnknownEntity(PermanentError):
    """The event names an entity that does not exist (never created, or expired). A service subclasses
    it once per entity (``UnknownOrder``), so the parked ledger names what was missing."""

    ENTITY = "entity"


def expect(envelope: Envelope, *event_types: str, entity_id: str, consumer: str, routed_by: str) -> str:
    """The id (``ids.<entity_id>``) of the entity an event this consumer handles names."""
    if envelope.event_type not in event_types:
        raise InvalidInput(
            f"event {envelope.event_id} has eventType {envelope.event_type}; {consumer} handles "
            f"{' and '.join(event_types)}. Check the {routed_by}."
        )
    return required_id(envelope, entity_id)


def required_id(envelope: Envelope, name: str) -> str:
    value = envelope.ids.get(name)
    if not value:
        raise InvalidInput(f"event {envelope.event_id} ({envelope.event_type}) has no ids.{name}")
    return value


def load[T](
    read: Callable[[str], T | None], entity_id: str, envelope: Envelope, *, unknown: type[UnknownEntity]
) -> T:
    """The entity ``read`` finds, or ``unknown`` (parked with the reason)."""
    found = read(entity_id)
    if found is None:
        raise unknown(
            f"event {envelope.event_id} ({envelope.event_type}) names {unknown.ENTITY} {entity_id}, which "
            "does not exist (never created, or expired). Parked."
        )
    return found


def duplicate(seen: Mapping[str, Any] | None, envelope: Envelope, **context: Any) -> bool:
    """True (and acknowledged) when the entity's ``seen`` records ``envelope`` as processed."""
    if seen_in(seen, envelope):
        acknowledge(envelope, "event already processed", **context)
        return True
    return False


def acknowledge(envelope: Envelope, why: str, *, metric: str | None = "Duplicate", **context: Any) -> None:
    """A delivery acknowledged without effect: counted (``metric``; None for a business no-op) and
    logged with why."""
    if metric:
        record_metric(metric, event_type=envelope.event_type)
    logger().info("acknowledged without effect", extra={"reason": why, **context})


def already(what: str) -> Callable[[Mapping[str, Any] | None], Exception]:
    """``on_condition_failed`` for a write that fails only once its step is done."""
    return lambda _old: AlreadyApplied(what)


def commit(write: Callable[[], object], envelope: Envelope, **context: Any) -> bool:
    """Run the step's write; True when it applied, False (acknowledged) when its failed condition
    showed the step already done (``AlreadyApplied``)."""
    try:
        write()
    except AlreadyApplied as exc:
        acknowledge(envelope, str(exc), **context)
        return False
    return True
