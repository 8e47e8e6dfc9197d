"""DynamoDB expression builders: the placeholders (``#name``, ``:value``) are generated, so a
data-access module writes attribute names once and never hand-numbers ``#a0``/``:a0``.

    update = Update().set("status", "PAID").add("version", 1).append("history", [entry])
    condition = Condition().equals(status="CREATED", version=3)
    write = update.write(table, key, condition=condition, on_condition_failed=explain)

Every value goes through an ExpressionAttributeValue (never into the expression text), and every
attribute name through an ExpressionAttributeName (so reserved words such as ``status`` are safe).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from relay.ddb import BusinessWrite, OnConditionFailed, condition_check, update


class _Placeholders:
    """Names and values of one expression; the same attribute name gets the same ``#`` placeholder.
    A condition and an update use different prefixes, so one request can hold both."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}

    def name(self, attribute: str) -> str:
        for placeholder, existing in self.names.items():
            if existing == attribute:
                return placeholder
        placeholder = f"#{self.prefix}{len(self.names)}"
        self.names[placeholder] = attribute
        return placeholder

    def value(self, value: Any) -> str:
        placeholder = f":{self.prefix}{len(self.values)}"
        self.values[placeholder] = value
        return placeholder


class Condition:
    """A condition expression: clauses joined with AND."""

    def __init__(self) -> None:
        self._p = _Placeholders("c")
        self._clauses: list[str] = []

    def equals(self, **attributes: Any) -> Self:
        """``attribute = value`` for each keyword (attribute names as stored)."""
        for attribute, value in attributes.items():
            self._clauses.append(f"{self._p.name(attribute)} = {self._p.value(value)}")
        return self

    def exists(self, attribute: str) -> Self:
        self._clauses.append(f"attribute_exists({self._p.name(attribute)})")
        return self

    def not_exists(self, attribute: str) -> Self:
        self._clauses.append(f"attribute_not_exists({self._p.name(attribute)})")
        return self

    def not_exists_in(self, attribute: str, key: str) -> Self:
        """``attribute.key`` is absent (an entry of a map attribute)."""
        self._clauses.append(f"attribute_not_exists({self._p.name(attribute)}.{self._p.name(key)})")
        return self

    def at_least(self, attribute: str, value: Any) -> Self:
        self._clauses.append(f"{self._p.name(attribute)} >= {self._p.value(value)}")
        return self

    @property
    def expression(self) -> str:
        if not self._clauses:
            raise ValueError("an empty condition")
        return " AND ".join(self._clauses)

    def check(
        self, table_name: str, key: Mapping[str, Any], *, on_condition_failed: OnConditionFailed | None = None
    ) -> BusinessWrite:
        """A transaction ConditionCheck: the item must satisfy this condition (nothing is written)."""
        return condition_check(
            table_name,
            key,
            self.expression,
            names=self._p.names,
            values=self._p.values,
            on_condition_failed=on_condition_failed,
        )


class Update:
    """A SET (and REMOVE) update expression."""

    def __init__(self) -> None:
        self._p = _Placeholders("u")
        self._sets: list[str] = []
        self._removes: list[str] = []

    def set(self, attribute: str, value: Any) -> Self:
        self._sets.append(f"{self._p.name(attribute)} = {self._p.value(value)}")
        return self

    def set_all(self, attributes: Mapping[str, Any]) -> Self:
        """``set`` for each attribute, in sorted order (a stable expression for the same input)."""
        for attribute in sorted(attributes):
            self.set(attribute, attributes[attribute])
        return self

    def set_if_absent(self, attribute: str, value: Any) -> Self:
        """Set only when the attribute has no value yet (the first writer's value stays)."""
        name = self._p.name(attribute)
        self._sets.append(f"{name} = if_not_exists({name}, {self._p.value(value)})")
        return self

    def append(self, attribute: str, items: list[Any]) -> Self:
        """Append to a list attribute, creating it when absent."""
        name = self._p.name(attribute)
        empty = self._p.value([])
        self._sets.append(f"{name} = list_append(if_not_exists({name}, {empty}), {self._p.value(items)})")
        return self

    def add(self, attribute: str, delta: int, *, absent_as: int | None = 0) -> Self:
        """``attribute += delta``; an absent attribute counts as ``absent_as`` (None: it must exist)."""
        name = self._p.name(attribute)
        base = name if absent_as is None else f"if_not_exists({name}, {self._p.value(absent_as)})"
        sign, magnitude = ("-", -delta) if delta < 0 else ("+", delta)
        self._sets.append(f"{name} = {base} {sign} {self._p.value(magnitude)}")
        return self

    def remove(self, *attributes: str) -> Self:
        """Remove attributes (absent ones are fine): e.g. a sparse index's keys once an entity is done."""
        self._removes.extend(self._p.name(attribute) for attribute in attributes)
        return self

    @property
    def expression(self) -> str:
        if not self._sets and not self._removes:
            raise ValueError("an empty update")
        clauses = []
        if self._sets:
            clauses.append("SET " + ", ".join(self._sets))
        if self._removes:
            clauses.append("REMOVE " + ", ".join(self._removes))
        return " ".join(clauses)

    def write(
        self,
        table_name: str,
        key: Mapping[str, Any],
        *,
        condition: Condition | None = None,
        on_condition_failed: OnConditionFailed | None = None,
    ) -> BusinessWrite:
        """The transaction Update of ``key``, conditional on ``condition`` when given."""
        names = dict(self._p.names)
        values = dict(self._p.values)
        if condition is not None:
            names.update(condition._p.names)
            values.update(condition._p.values)
        return update(
            table_name,
            key,
            self.expression,
            condition.expression if condition is not None else None,
            names=names,
            values=values,
            on_condition_failed=on_condition_failed,
        )
