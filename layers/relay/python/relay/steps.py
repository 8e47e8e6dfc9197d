"""The steps' one skeleton: each service declares its steps as data (``StepRule``), and every consumer
step goes the same way around its one write.

A step (payments' payment, post-processing and invoice steps; orders' inventory, paid-orders,
failed-payments and shipping steps; loyalty's accrual and reversal) is a ``StepRule`` -- the event
types that run it, the id its events name, the states in which it is already done, the states it runs
from, and what a stale write means (``stale``) -- and goes this way:

1. ``StepRule.id_of``: the event is one the step handles, and names the entity (``ids.<entity_id>``),
   or it is ``InvalidInput`` (parked: a filter policy or a producer is wrong); ``routes`` picks the
   step of a consumer that runs several by the event's type, with the same answer for any other;
2. ``load``: the entity it names, or ``UnknownEntity`` (parked: retrying will not create it);
3. ``duplicate``: the entity records the event as processed (``relay.entity_events.seen``; the same
   eventId with another payload is a ``PayloadConflict``), and the step ``acknowledge``\\ s it without
   effect -- as it does a step already done (``StepRule.done``); ``begin`` is 1-3 for a step whose
   entity must exist, with ``StepRule.runs_from`` checked (another state is ``IllegalTransition``);
4. the decision, which is the service's own;
5. ``commit``: ONE write (or one transaction where several items move), conditional on what was read;
   a failed condition that shows the step done (``already``, ``StepRule.on_stale``) is acknowledged too.

The steps decide; the stores own tables, clients and how writes are assembled.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Concatenate, Literal, Protocol

from relay.entity_events import seen_in
from relay.envelope import Envelope
from relay.errors import ConcurrentWrite, InvalidInput, PermanentError
from relay.observability import logger, record_metric
from relay.state_machine import AlreadyApplied, IllegalTransition, Transition, explain_stale, state_of

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


type Stale = Literal["retry", "park"]
"""What a step's failed transition condition means when the entity is neither in the state read nor
done: ``"retry"`` when other consumers move the entity too (it changed since it was read; the retry
reads it again and decides from what it finds), ``"park"`` when only the entity's own steps move it,
one each (the step cannot apply: ``IllegalTransition``, parked with the reason, never applied)."""


@dataclass(frozen=True)
class StepRule:
    """One step, declared as data beside the service's steps."""

    step: str
    """What the step is called in messages ("payment step", "inventory")."""
    event_types: tuple[str, ...]
    """The events that run it; another is ``InvalidInput``, parked: the ``routed_by`` is wrong."""
    entity_id: str
    """The id (``ids.<entity_id>``) of the entity its events name."""
    routed_by: str = "subscription's filter policy"
    done: frozenset[str] = frozenset()
    """The entity's states in which the step is already done: a delivery is acknowledged without effect."""
    runs_from: frozenset[str] = frozenset()
    """The states the step runs from (empty: the step decides); another is ``IllegalTransition``."""
    stale: Stale = "retry"

    def id_of(self, envelope: Envelope) -> str:
        return expect(
            envelope,
            *self.event_types,
            entity_id=self.entity_id,
            consumer=self.step,
            routed_by=self.routed_by,
        )

    def on_stale(
        self,
        transition: Transition[Any],
        done: Collection[str] | None = None,
        concurrent: Collection[str] = frozenset(),
    ) -> Callable[[Mapping[str, Any] | None], Exception]:
        """A failed transition condition (``relay.state_machine.explain_stale``): in a state of ``done``
        (the rule's own by default) -> ``AlreadyApplied``; in another, what the rule's ``stale`` says.
        Except a state of ``concurrent``: one this same step runs from, where a concurrent delivery of
        the step took the entity (two copies of one event, one ahead of the other): transient, and the
        retry reads it again and carries on from there, or acknowledges."""
        done = self.done if done is None else done
        explain = explain_stale(transition, done, elsewhere="retry" if self.stale == "retry" else "illegal")
        if not concurrent:
            return explain

        def explain_or_retry(old: Mapping[str, Any] | None) -> Exception:
            status, version = state_of(old)
            if status is not None and status in concurrent and status not in done:
                return ConcurrentWrite(
                    f"{transition.label} moved to {status} v{version} by a concurrent delivery of this step "
                    f"(read {transition.source} v{transition.expected_version}); retrying with a fresh read."
                )
            return explain(old)

        return explain_or_retry


class Stateful(Protocol):
    """An entity a step reads: its state and the events it records as processed."""

    @property
    def status(self) -> str: ...
    @property
    def seen(self) -> Mapping[str, Any] | None: ...


def routes[**P](
    *table: tuple[StepRule, Callable[Concatenate[Envelope, P], None]],
) -> Callable[Concatenate[Envelope, P], None]:
    """A consumer that runs several steps: each event goes to the step whose rule handles its type;
    any other type is ``InvalidInput`` (parked), naming every type the consumer handles."""
    by_type = {event_type: step for rule, step in table for event_type in rule.event_types}
    handled = tuple(by_type)
    first = table[0][0]

    def route(envelope: Envelope, /, *args: P.args, **kwargs: P.kwargs) -> None:
        step = by_type.get(envelope.event_type)
        if step is None:
            expect(
                envelope, *handled, entity_id=first.entity_id, consumer=first.step, routed_by=first.routed_by
            )
            return
        step(envelope, *args, **kwargs)

    return route


def _context_name(entity_id: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", entity_id).lower()  # operationId -> operation_id


def begin[T: Stateful](
    rule: StepRule, envelope: Envelope, read: Callable[[str], T | None], *, unknown: type[UnknownEntity]
) -> T | None:
    """How a step whose entity must exist starts: the entity the event names, or None when the delivery
    is acknowledged without effect (already processed, or the step already done). An entity in a state
    the step cannot run from is an ``IllegalTransition``: parked with the reason."""
    entity_id = rule.id_of(envelope)
    entity = load(read, entity_id, envelope, unknown=unknown)
    context = {_context_name(rule.entity_id): entity_id, "status": str(entity.status)}
    if duplicate(entity.seen, envelope, **context):
        return None
    if entity.status in rule.done:
        acknowledge(envelope, f"{rule.step} already done", **context)
        return None
    if rule.runs_from and entity.status not in rule.runs_from:
        raise IllegalTransition(
            f"{unknown.ENTITY} {entity_id} is {entity.status}; {envelope.event_type} expects "
            f"{' or '.join(sorted(rule.runs_from))}, the {rule.step} cannot run. Not applied."
        )
    return entity


class Clocked(Protocol):
    @property
    def clock(self) -> Clock: ...


def runs[C, D: Clocked, T: Stateful](
    rule: StepRule, *, read: Callable[[D, str], T | None], unknown: type[UnknownEntity]
) -> Callable[[Callable[[Envelope, C, D, T, datetime], None]], Callable[[Envelope, C, D], None]]:
    """A step's entry: ``begin`` decides whether (and on which entity) the body runs, and the body gets
    the moment it runs at, read once from ``deps.clock``."""

    def wrap(body: Callable[[Envelope, C, D, T, datetime], None]) -> Callable[[Envelope, C, D], None]:
        @functools.wraps(body)
        def step(envelope: Envelope, ctx: C, deps: D, /) -> None:
            entity = begin(rule, envelope, lambda entity_id: read(deps, entity_id), unknown=unknown)
            if entity is not None:
                body(envelope, ctx, deps, entity, deps.clock())

        return step

    return wrap


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
