"""The steps' one skeleton (``relay.steps``): a service's steps declared as data (socket-free)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from relay import steps
from relay.envelope import Envelope, new_envelope
from relay.errors import ConcurrentWrite, InvalidInput
from relay.state_machine import AlreadyApplied, IllegalTransition, StateMachine
from relay.steps import StepRule

MACHINE = StateMachine(
    "light", {"RED": frozenset({"GREEN"}), "GREEN": frozenset({"RED"}), "OFF": frozenset()}
)
SWITCH = StepRule(
    "switch", ("SwitchDue",), "lightId", done=frozenset({"GREEN"}), runs_from=frozenset({"RED"})
)


class UnknownLight(steps.UnknownEntity):
    ENTITY = "light"


@dataclass
class Light:
    status: str
    seen: dict[str, Any] = field(default_factory=dict)


def event(event_type: str = "SwitchDue", **ids: str) -> Envelope:
    return new_envelope(
        event_type,
        identity=["l-1", event_type],
        ids=ids or {"lightId": "l-1"},
        payload={},
        correlation_id="c-1",
    )


def plan():  # type: ignore[no-untyped-def]
    return MACHINE.plan("l-1", "RED", 4, "GREEN", at="2026-12-01T00:00:00.000Z", entry={})


def test_a_stale_write_retries_or_parks_as_the_rule_declares() -> None:
    retries = SWITCH.on_stale(plan())
    parks = StepRule("switch", ("SwitchDue",), "lightId", done=frozenset({"GREEN"}), stale="park").on_stale(
        plan()
    )

    assert isinstance(retries({"status": "GREEN", "version": 5}), AlreadyApplied)
    assert isinstance(parks({"status": "GREEN", "version": 5}), AlreadyApplied)
    assert isinstance(retries({"status": "OFF", "version": 6}), ConcurrentWrite)
    assert isinstance(parks({"status": "OFF", "version": 6}), IllegalTransition)


def test_a_state_a_concurrent_delivery_of_the_same_step_took_is_retried_even_where_stale_parks() -> None:
    parks = StepRule("switch", ("SwitchDue",), "lightId", stale="park")
    explain = parks.on_stale(plan(), frozenset(), concurrent=frozenset({"OFF"}))
    assert isinstance(explain({"status": "OFF", "version": 5}), ConcurrentWrite)


def test_begin_acknowledges_a_step_already_done_and_parks_a_state_it_cannot_run_from() -> None:
    assert steps.begin(SWITCH, event(), lambda _id: Light("GREEN"), unknown=UnknownLight) is None
    assert steps.begin(SWITCH, event(), lambda _id: Light("RED"), unknown=UnknownLight) == Light("RED")
    with pytest.raises(IllegalTransition, match="light l-1 is OFF; SwitchDue expects RED"):
        steps.begin(SWITCH, event(), lambda _id: Light("OFF"), unknown=UnknownLight)
    with pytest.raises(UnknownLight, match="names light l-1, which does not exist"):
        steps.begin(SWITCH, event(), lambda _id: None, unknown=UnknownLight)
    with pytest.raises(InvalidInput, match=r"has no ids\.lightId"):
        steps.begin(SWITCH, event(otherId="x"), lambda _id: Light("RED"), unknown=UnknownLight)


def test_routes_run_the_step_of_the_events_type_and_park_any_other_naming_every_type() -> None:
    ran: list[str] = []
    on = StepRule("lights", ("SwitchedOn",), "lightId", routed_by="bus rule's event pattern")
    off = StepRule("lights", ("SwitchedOff",), "lightId", routed_by="bus rule's event pattern")
    route = steps.routes(
        (on, lambda e, who: ran.append(f"on {who}")), (off, lambda e, who: ran.append(f"off {who}"))
    )

    route(event("SwitchedOff"), "me")
    route(event("SwitchedOn"), "you")
    assert ran == ["off me", "on you"]
    with pytest.raises(InvalidInput, match=r"lights handles SwitchedOn and SwitchedOff\. Check the bus rule"):
        route(event("SwitchDue"), "them")
