"""IAM policy evaluation for the sandbox: each function's synthesized role, and the templates' resource
policies, decide every AWS call its execution environment makes, as IAM would decide it.

moto's own access control (``INITIAL_NO_AUTH_ACTION_COUNT``) was the first candidate; its module says
what it lacks (moto 5.2.5, ``moto/iam/access_control.py``): the Resource element is not evaluated for most
services (every request is checked against ``*``), conditions only for trust policies, no resource-based
policies, and no per-item actions for ``TransactWriteItems``. A grant on one table would then be
indistinguishable from a grant on every table, which is the bug this exists to catch. So the sandbox
evaluates the policies itself, with IAM's rules for the parts the templates use:

- a statement applies when its Action (or NotAction) matches the action, case-insensitively with ``*``
  and ``?`` wildcards, its Resource (or NotResource) matches the ARN, case-sensitively, with the same
  wildcards (``*`` crosses ``/`` and ``:``), its Principal matches (resource policies), and every
  condition holds;
- an explicit Deny anywhere wins; otherwise an Allow in an identity policy OR in the resource's policy
  (same account) allows; otherwise the request is implicitly denied;
- conditions: the String*, Arn*, Bool, Null, Numeric* operators, ``…IfExists``, and the ``ForAnyValue:`` /
  ``ForAllValues:`` set prefixes. An operator outside that list fails the model load, loudly, rather than
  being evaluated wrongly.

The model is built by ``emulator.provision`` from the templates and evaluated in the emulator process
(``emulator.iam_enforcer``); this module is pure (no I/O) so it is unit-tested directly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

ACCOUNT_ROOT = "arn:aws:iam::{account}:root"


class PolicyError(ValueError):
    """A policy document the sandbox cannot evaluate faithfully."""


def as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


@lru_cache(maxsize=4096)
def _pattern(glob: str, ignore_case: bool) -> re.Pattern[str]:
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob)
    return re.compile(f"^{body}$", re.IGNORECASE | re.DOTALL if ignore_case else re.DOTALL)


def matches(glob: str, value: str, *, ignore_case: bool = False) -> bool:
    """IAM's wildcard match: ``*`` any run of characters (``/`` and ``:`` included), ``?`` one."""
    if glob == "*":
        return True
    if "*" not in glob and "?" not in glob:
        return glob.lower() == value.lower() if ignore_case else glob == value
    return _pattern(glob, ignore_case).match(value) is not None


# -- conditions ----------------------------------------------------------------------------------------


def _string_equals(expected: str, actual: str) -> bool:
    return expected == actual


def _string_like(expected: str, actual: str) -> bool:
    return matches(expected, actual)


def _arn_like(expected: str, actual: str) -> bool:
    # ARN matching is per colon-separated part, each part a wildcard match; a pattern with fewer parts
    # cannot match. For the ARNs templates use, a whole-string match with the same wildcards agrees.
    if expected.count(":") != actual.count(":") and "*" not in expected:
        return False
    return matches(expected, actual)


def _numeric(op: str) -> Any:
    def compare(expected: str, actual: str) -> bool:
        try:
            e, a = float(expected), float(actual)
        except ValueError:
            return False
        return {
            "NumericEquals": a == e,
            "NumericNotEquals": a != e,
            "NumericLessThan": a < e,
            "NumericLessThanEquals": a <= e,
            "NumericGreaterThan": a > e,
            "NumericGreaterThanEquals": a >= e,
        }[op]

    return compare


# operator -> (value test, negated). A negated operator is true when NO expected value matches.
_OPERATORS: dict[str, tuple[Any, bool]] = {
    "StringEquals": (_string_equals, False),
    "StringNotEquals": (_string_equals, True),
    "StringEqualsIgnoreCase": (lambda e, a: e.lower() == a.lower(), False),
    "StringNotEqualsIgnoreCase": (lambda e, a: e.lower() == a.lower(), True),
    "StringLike": (_string_like, False),
    "StringNotLike": (_string_like, True),
    "ArnEquals": (_string_equals, False),
    "ArnNotEquals": (_string_equals, True),
    "ArnLike": (_arn_like, False),
    "ArnNotLike": (_arn_like, True),
    "Bool": (lambda e, a: e.lower() == a.lower(), False),
    **{
        op: (_numeric(op), False)
        for op in (
            "NumericEquals",
            "NumericLessThan",
            "NumericLessThanEquals",
            "NumericGreaterThan",
            "NumericGreaterThanEquals",
        )
    },
    "NumericNotEquals": (_numeric("NumericEquals"), True),
}


@dataclass(frozen=True)
class Condition:
    operator: str
    key: str
    values: tuple[str, ...]

    @staticmethod
    def parse(operator: str, key: str, values: Any) -> Condition:
        base = operator.split(":", 1)[-1].removesuffix("IfExists")
        if base != "Null" and base not in _OPERATORS:
            raise PolicyError(
                f"condition operator {operator} is not evaluated by the sandbox; extend emulator/iam.py "
                "before using it, or the sandbox would allow or deny what AWS would not"
            )
        return Condition(operator, key, tuple(_scalar(v) for v in as_list(values)))

    def holds(self, context: dict[str, list[str]]) -> bool:
        set_prefix, _, operator = self.operator.rpartition(":")
        if_exists = operator.endswith("IfExists")
        base = operator.removesuffix("IfExists")
        # Context keys are case-insensitive; the context is built with lower-case keys.
        actual = context.get(self.key.lower())
        if base == "Null":
            # Null: "true" means the key must be absent.
            return (actual is None) == (self.values[0].lower() == "true")
        if actual is None:
            if if_exists:
                return True
            # A missing key satisfies only negated operators (and ForAllValues, vacuously).
            return _OPERATORS[base][1] or set_prefix == "ForAllValues"
        test, negated = _OPERATORS[base]

        def one(value: str) -> bool:
            hit = any(test(expected, value) for expected in self.values)
            return not hit if negated else hit

        if set_prefix == "ForAllValues":
            return all(one(v) for v in actual)
        return any(one(v) for v in actual)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# -- statements and policies ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Statement:
    effect: str  # "Allow" | "Deny"
    actions: tuple[str, ...]
    not_actions: tuple[str, ...]
    resources: tuple[str, ...]
    not_resources: tuple[str, ...]
    principals: tuple[tuple[str, str], ...] | None  # (kind, value); None in identity policies
    conditions: tuple[Condition, ...]
    source: str  # "<policy logical id>[#sid]", for the report and denial messages

    @staticmethod
    def parse(raw: dict[str, Any], source: str, *, resource_policy: bool) -> Statement:
        effect = raw.get("Effect")
        if effect not in ("Allow", "Deny"):
            raise PolicyError(f"{source}: Effect must be Allow or Deny, not {effect!r}")
        principals: tuple[tuple[str, str], ...] | None = None
        if resource_policy:
            if "NotPrincipal" in raw:
                raise PolicyError(f"{source}: NotPrincipal is not evaluated by the sandbox")
            principal = raw.get("Principal")
            if principal == "*":
                principals = (("AWS", "*"),)
            elif isinstance(principal, dict):
                principals = tuple(
                    (kind, str(value)) for kind, values in principal.items() for value in as_list(values)
                )
            else:
                raise PolicyError(f"{source}: a resource policy statement needs a Principal")
        conditions = tuple(
            Condition.parse(operator, key, values)
            for operator, block in (raw.get("Condition") or {}).items()
            for key, values in block.items()
        )
        sid = raw.get("Sid")
        return Statement(
            effect=effect,
            actions=tuple(str(a) for a in as_list(raw.get("Action"))),
            not_actions=tuple(str(a) for a in as_list(raw.get("NotAction"))),
            resources=tuple(str(r) for r in as_list(raw.get("Resource", "*" if resource_policy else None))),
            not_resources=tuple(str(r) for r in as_list(raw.get("NotResource"))),
            principals=principals,
            conditions=conditions,
            source=f"{source}#{sid}" if sid else source,
        )

    def action_matches(self, action: str) -> bool:
        if self.not_actions:
            return not any(matches(a, action, ignore_case=True) for a in self.not_actions)
        return any(matches(a, action, ignore_case=True) for a in self.actions)

    def resource_matches(self, resource: str) -> bool:
        if self.not_resources:
            return not any(matches(r, resource) for r in self.not_resources)
        return any(matches(r, resource) for r in self.resources)

    def principal_matches(self, caller: Caller) -> bool:
        if self.principals is None:
            return True
        for kind, value in self.principals:
            if kind == "AWS" and (value == "*" or value in caller.aws_principals):
                return True
            if kind == "Service" and value == caller.service:
                return True
        return False

    def applies(self, caller: Caller, action: str, resource: str, context: dict[str, list[str]]) -> bool:
        return (
            self.action_matches(action)
            and self.resource_matches(resource)
            and self.principal_matches(caller)
            and all(c.holds(context) for c in self.conditions)
        )


def parse_policy(document: dict[str, Any], source: str, *, resource_policy: bool = False) -> list[Statement]:
    return [
        Statement.parse(raw, f"{source}[{i}]", resource_policy=resource_policy)
        for i, raw in enumerate(as_list(document.get("Statement")))
    ]


@dataclass(frozen=True)
class Caller:
    """Who makes a request: a function's assumed role, or an AWS service principal (SNS delivering)."""

    name: str  # the function, or the service
    arn: str  # what AWS names in a denial: the assumed-role session ARN, or the service
    account: str
    role_arn: str = ""
    service: str = ""  # "sns.amazonaws.com" for a service principal

    @property
    def aws_principals(self) -> frozenset[str]:
        """The ``Principal: {"AWS": …}`` values that name this caller directly."""
        if not self.role_arn:
            return frozenset()
        return frozenset({self.role_arn, self.arn})


@dataclass(frozen=True)
class Decision:
    allowed: bool
    explicit_deny: bool = False
    by: tuple[Statement, ...] = ()  # the identity statements that allowed it (for the usage report)
    reason: str = ""


@dataclass
class Principal:
    caller: Caller
    statements: list[Statement] = field(default_factory=list)


def decide(
    principal: Principal | None,
    caller: Caller,
    action: str,
    resource: str,
    context: dict[str, list[str]],
    resource_policy: list[Statement] | None = None,
) -> Decision:
    """IAM's decision for one (action, resource) of a request, same-account rules."""
    identity = principal.statements if principal is not None else []
    resource_statements = resource_policy or []
    for statement in identity:
        if statement.effect == "Deny" and statement.applies(caller, action, resource, context):
            return Decision(False, True, reason="with an explicit deny in an identity-based policy")
    for statement in resource_statements:
        if statement.effect == "Deny" and statement.applies(caller, action, resource, context):
            return Decision(False, True, reason="with an explicit deny in a resource-based policy")
    by = tuple(s for s in identity if s.effect == "Allow" and s.applies(caller, action, resource, context))
    if by:
        return Decision(True, by=by)
    if any(s.effect == "Allow" and s.applies(caller, action, resource, context) for s in resource_statements):
        return Decision(True)
    if principal is None:
        return Decision(False, reason="because no resource-based policy allows the action")
    return Decision(False, reason=f"because no identity-based policy allows the {action} action")


def grants(statement: Statement) -> list[tuple[str, str]]:
    """The (action, resource) pairs an Allow statement grants, for the never-used report."""
    return [(a, r) for a in statement.actions for r in statement.resources]


def access_key_for(function: str) -> str:
    """The access key id a function's execution environment signs with in the sandbox: stable per
    function, shaped like the temporary keys Lambda hands out (``ASIA`` + 16 characters)."""
    import base64
    import hashlib

    digest = base64.b32encode(hashlib.sha256(function.encode()).digest()).decode()
    return "ASIA" + digest[:16]
