"""The kernel's entity state machine and DynamoDB expression builders (socket-free)."""

from __future__ import annotations

import enum

import pytest

from relay.errors import ConcurrentWrite
from relay.expressions import Condition, Update
from relay.state_machine import (
    AlreadyApplied,
    IllegalTransition,
    StateMachine,
    explain_stale,
    transition_write,
)


class Light(enum.StrEnum):
    RED = "RED"
    GREEN = "GREEN"
    OFF = "OFF"


MACHINE = StateMachine(
    "light",
    {
        Light.RED: frozenset({Light.GREEN, Light.OFF}),
        Light.GREEN: frozenset({Light.RED}),
        Light.OFF: frozenset(),
    },
)


def plan(target: Light = Light.GREEN):  # type: ignore[no-untyped-def]
    return MACHINE.plan(
        "l-1", Light.RED, 4, target, at="2026-12-01T00:00:00.000Z", entry={"status": str(target)}
    )


def test_illegal_transition_is_refused_before_anything_is_written_naming_what_is_allowed() -> None:
    with pytest.raises(
        IllegalTransition,
        match=r"light l-9: OFF -> RED is not a legal transition \(allowed from OFF: none, it is terminal\)",
    ):
        MACHINE.plan("l-9", Light.OFF, 1, Light.RED, at="t", entry={})
    assert MACHINE.is_terminal(Light.OFF) and not MACHINE.is_terminal(Light.RED)


def test_transition_write_is_conditional_on_the_state_and_version_that_were_read() -> None:
    write = transition_write(
        "t",
        {"pk": "L#1"},
        plan(),
        history_attribute="history",
        attributes={"colour": "green"},
        on_condition_failed=lambda _o: RuntimeError(),
    )
    body = write.body
    names, values = body["ExpressionAttributeNames"], body["ExpressionAttributeValues"]
    condition = body["ConditionExpression"]
    resolved = condition
    for placeholder, name in names.items():
        resolved = resolved.replace(placeholder, name)
    for placeholder in sorted(values, key=len, reverse=True):
        scalar = values[placeholder].get("S", values[placeholder].get("N"))
        if isinstance(scalar, str):
            resolved = resolved.replace(placeholder, scalar)
    assert resolved == "status = RED AND version = 4"
    assert set(names.values()) == {"status", "version", "updatedAt", "history", "colour"}
    assert {"N": "5"} in values.values() and {"S": "GREEN"} in values.values()
    assert "list_append(if_not_exists(" in body["UpdateExpression"]


def test_stale_transition_is_already_applied_concurrent_or_illegal_by_what_the_item_was() -> None:
    strict = explain_stale(plan(), {"GREEN"}, elsewhere="illegal")
    lenient = explain_stale(plan(), {"GREEN"}, elsewhere="retry")

    assert isinstance(strict({"status": "GREEN", "version": 5}), AlreadyApplied)
    assert isinstance(strict({"status": "RED", "version": 6}), ConcurrentWrite)
    assert isinstance(strict({"status": "OFF", "version": 6}), IllegalTransition)
    assert isinstance(strict(None), IllegalTransition)
    assert isinstance(lenient({"status": "OFF", "version": 6}), ConcurrentWrite)
    assert "light l-1 is OFF, not RED (version 4)" in str(strict({"status": "OFF", "version": 6}))


def test_update_and_condition_placeholders_never_collide_and_values_never_enter_the_text() -> None:
    write = (
        Update()
        .set("status", "a")
        .add("stock", -3, absent_as=None)
        .add("reserved", 3)
        .set_if_absent("firstAt", "t")
        .write(
            "t", {"pk": "x"}, condition=Condition().exists("stock").at_least("stock", 3).equals(status="b")
        )
    )
    body = write.body
    expression = body["UpdateExpression"] + " " + body["ConditionExpression"]
    assert "'a'" not in expression and " 3" not in expression.replace(":", " :")
    used = {
        token
        for token in expression.replace(",", " ").replace("(", " ").replace(")", " ").split()
        if token[0] in "#:"
    }
    assert used == set(body["ExpressionAttributeNames"]) | set(body["ExpressionAttributeValues"])
    assert body["UpdateExpression"].startswith(
        "SET #u0 = :u0, #u1 = #u1 - :u1, #u2 = if_not_exists(#u2, :u2) + :u3"
    )


def test_empty_expressions_are_refused() -> None:
    with pytest.raises(ValueError):
        Update().write("t", {"pk": "x"})
    with pytest.raises(ValueError):
        Condition().check("t", {"pk": "x"})
