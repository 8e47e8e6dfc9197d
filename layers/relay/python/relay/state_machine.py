"""The state machine of an entity (an operation, an order): its allowed transitions, the plan of one
transition, the conditional write that applies it, and what a failed condition means.

Every transition is written conditionally on the state AND version the writer read, so two consumers
that hold the same message cannot both apply it, and a stale or illegal transition is rejected by
DynamoDB, never applied. ``StateMachine.plan`` refuses an illegal transition before anything is sent;
``explain_stale`` turns a failed condition (the item as it was, ALL_OLD) into the right outcome:

* the entity is already where this step leads (or past it) -> ``AlreadyApplied``: acknowledge, no effect;
* it changed since it was read -> transient (``ConcurrentWrite``): retry with a fresh read;
* it is somewhere this step can never start from -> ``IllegalTransition`` (permanent: parked).

Stored shape (the data-access module owns the key and any other attribute): ``status``, ``version``
(starts at 1, +1 per transition), ``updatedAt`` and a history list attribute the transition appends
its entry to.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from relay.ddb import BusinessWrite, OnConditionFailed
from relay.errors import ConcurrentWrite, PermanentError
from relay.expressions import Condition, Update

STATUS = "status"
VERSION = "version"
UPDATED_AT = "updatedAt"


class IllegalTransition(PermanentError):
    """A transition the state machine does not allow, or one planned from a state that is no longer
    current. Never applied; a consumer parks the message that asked for it, an API answers 409."""


class AlreadyApplied(Exception):
    """The change a delivery asks for is already in place (a duplicate, a late redelivery, or a
    concurrent delivery won). Not a RelayError: it must never be retried or parked."""


def now_iso(moment: datetime | None = None) -> str:
    """A UTC timestamp as stored and shown: ``2026-12-01T13:17:09.123Z``."""
    return (
        (moment or datetime.now(UTC))
        .astimezone(UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def parse_iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def short_moment(at: str) -> str:
    """A ``now_iso`` timestamp as a history entry keeps it: base-36 epoch milliseconds (``mi4d5v6g``,
    8 characters for 24); ``iso_moment`` reads it back exactly."""
    number = round(parse_iso(at).timestamp() * 1000)
    text = ""
    while True:
        number, digit = divmod(number, 36)
        text = _DIGITS[digit] + text
        if not number:
            return text


def iso_moment(short: str) -> str:
    return now_iso(datetime.fromtimestamp(int(short, 36) / 1000, UTC))


@dataclass(frozen=True)
class Transition[S: enum.StrEnum]:
    """A legal transition of one entity, planned from the state and version that were read.

    ``set_attributes`` are the domain fields set with it (the data-access module maps them to
    attribute names); ``entry`` is what the history records."""

    entity: str
    entity_id: str
    source: S
    target: S
    expected_version: int
    at: str
    entry: Mapping[str, Any]
    set_attributes: dict[str, Any] = field(default_factory=dict)

    @property
    def next_version(self) -> int:
        return self.expected_version + 1

    @property
    def label(self) -> str:
        return f"{self.entity} {self.entity_id}"


class StateMachine[S: enum.StrEnum]:
    """The allowed transitions of one kind of entity (``entity`` names it in every message)."""

    def __init__(self, entity: str, allowed: Mapping[S, frozenset[S]]) -> None:
        self.entity = entity
        self.allowed = allowed

    def is_terminal(self, status: S) -> bool:
        return not self.allowed[status]

    def check(self, entity_id: str, source: S, target: S) -> None:
        if target not in self.allowed[source]:
            allowed = ", ".join(sorted(self.allowed[source])) or "none, it is terminal"
            raise IllegalTransition(
                f"{self.entity} {entity_id}: {source} -> {target} is not a legal transition "
                f"(allowed from {source}: {allowed}); not applied."
            )

    def plan(
        self,
        entity_id: str,
        source: S,
        version: int,
        target: S,
        *,
        at: str,
        entry: Mapping[str, Any],
        **attributes: Any,
    ) -> Transition[S]:
        self.check(entity_id, source, target)
        return Transition(
            entity=self.entity,
            entity_id=entity_id,
            source=source,
            target=target,
            expected_version=version,
            at=at,
            entry=entry,
            set_attributes=attributes,
        )


def transition_write(
    table_name: str,
    key: Mapping[str, Any],
    transition: Transition[Any],
    *,
    history_attribute: str,
    attributes: Mapping[str, Any],
    on_condition_failed: OnConditionFailed,
    remove: Collection[str] = (),
    record: Callable[[Update], Update] | None = None,
    history_entry: Callable[[Mapping[str, Any]], Any] = dict,
) -> BusinessWrite:
    """The conditional update that applies ``transition``: status, version + 1, updatedAt, the history
    entry and ``attributes`` (stored names and values), removing ``remove`` -- only from the state AND
    version it was planned from, so a concurrent or stale writer fails instead of overwriting.
    ``record`` adds what the same write records (``relay.entity_events.record``: the processed event
    and the events it produces), so one write is the whole step."""
    change = (
        Update()
        .set(STATUS, str(transition.target))
        .set(VERSION, transition.next_version)
        .set(UPDATED_AT, transition.at)
        .append(history_attribute, [history_entry(transition.entry)])
        .set_all(attributes)
    )
    if remove:
        change.remove(*sorted(remove))
    if record is not None:
        change = record(change)
    expected = Condition().equals(**{STATUS: str(transition.source), VERSION: transition.expected_version})
    return change.write(table_name, key, condition=expected, on_condition_failed=on_condition_failed)


def state_of(item: Mapping[str, Any] | None) -> tuple[str | None, int | None]:
    """State and version of an item as returned with a failed condition (ALL_OLD)."""
    if not item or STATUS not in item:
        return None, None
    return str(item[STATUS]), int(item.get(VERSION, 0))


def explain_stale(
    transition: Transition[Any],
    done: Collection[str],
    *,
    elsewhere: Literal["retry", "illegal"],
) -> Callable[[Mapping[str, Any] | None], Exception]:
    """What a failed transition condition means, from the item as it was (ALL_OLD):

    * in a state of ``done`` (this step's work is already committed) -> ``AlreadyApplied``;
    * same state, other version -> a concurrent writer: transient, retry with a fresh read;
    * any other state -> ``elsewhere``: ``"retry"`` when another writer may legitimately have moved
      it (the retry reads again and decides from what it finds), ``"illegal"`` when nothing else may
      move it from the state that was read (permanent: parked with the reason, never applied).
    """

    def explain(old: Mapping[str, Any] | None) -> Exception:
        status, version = state_of(old)
        if status is not None and status in done:
            return AlreadyApplied(f"{transition.label} is already {status}")
        if (status is not None and status == transition.source) or elsewhere == "retry":
            return ConcurrentWrite(
                f"{transition.label} changed concurrently (now {status or 'gone'} v{version}; read "
                f"{transition.source} v{transition.expected_version}); retrying with a fresh read."
            )
        return IllegalTransition(
            f"{transition.label} is {status or 'gone'}, not {transition.source} (version "
            f"{transition.expected_version}); {transition.source} -> {transition.target} not applied."
        )

    return explain
