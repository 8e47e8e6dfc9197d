"""Amazon EventBridge event patterns: the checks ``PutRule`` makes and the matching a bus does.

``validate_pattern`` raises ``InvalidPattern`` for a pattern EventBridge refuses; ``compile_pattern``
turns a pattern (a dict or its JSON text) into a predicate on events, cached on the JSON text, so a
rule is parsed once however many events it sees; ``pattern_matches(pattern, event)`` is the one-shot
form.

Semantics, from the EventBridge user guide:

* https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns.html and
  https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-pattern.html: every field named in
  the pattern must match (AND), with the same nesting as in the event; fields the pattern does not name
  are ignored; the value to match is a JSON array of alternatives (OR); strings match exactly,
  character by character, case-sensitively; values follow JSON (strings, numbers, true, false, null).
* https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns-null-values.html:
  ``[null]`` matches a JSON null and ``[""]`` an empty string; the two are not interchangeable.
* https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns-arrays.html: when the
  event's value is an array, the field matches if any element matches.
* https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-pattern-operators.html and
  https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns-content-based-filtering.html:
  ``prefix`` / ``suffix`` (strings only; also ``{"prefix": {"equals-ignore-case": ...}}`` and the same
  for ``suffix``), ``equals-ignore-case``, ``anything-but`` (a string, a number, a list of only strings
  or only numbers, or ``{"prefix" | "suffix" | "equals-ignore-case" | "wildcard": value or list}``),
  ``numeric`` (JSON numbers only: ``["=", n]``, ``["<", n]``, ``[">", a, "<=", b]``, ...), ``cidr``
  (IPv4 and IPv6), ``exists`` (presence of a *leaf*: "does not work on intermediate nodes", so a field
  holding an object counts as absent), ``wildcard`` (``*`` is any run of characters, ``\\*`` a literal
  ``*`` and ``\\\\`` a literal backslash), and ``$or`` (a list of sub-patterns, any of which may match,
  ANDed with the sibling fields; PutRule refuses a pattern whose ``$or`` arrays multiply out to more than
  1000 combinations). If a pattern names a key twice, the last one counts (content-filtering page); the
  JSON text form gets that from ``json.loads``.

Where the guide is silent this module follows Event Ruler, the open-source matcher AWS publishes for
EventBridge-style patterns (https://github.com/aws/event-ruler: README.md and JsonRuleCompiler.java).
Most ``InvalidPattern`` reasons are worded like its compiler's errors. Choices made:

* Numbers compare as numbers: ``[5]`` matches ``5.0`` and ``[300]`` matches ``3.0e2`` (Ruler compiles a
  number to a numeric-equality test). An older edition of eb-event-patterns.html said 300, 300.0 and
  3.0e2 are *not* equal (compared as text); current Ruler compares them numerically, so this does too.
  Strings and numbers never equal each other (``"5"`` vs ``5``), and ``true``/``false`` are not numbers.
  The ``numeric`` bounds take the full float64 range (the guide once said ±5.0e9).
* A leaf is a string, number, boolean or null. ``exists: true`` matches any leaf, null included (null is
  a value; ``[null]`` matches it). A missing field, an object, and an array with no scalar in it have no
  leaf, so for them only ``exists: false`` matches; ``anything-but`` does not match them.
* Arrays of objects: each element is matched on its own, so two fields of one sub-pattern must match
  within the same element (Ruler's "array-consistent" matching in ``rulesForJSONEvent``). Arrays inside
  arrays are flattened. ``$or`` is expanded into its combinations first, as Ruler does, so this holds
  across ``$or`` branches too. ``exists: false`` under an array of objects matches when some element
  lacks the field (Ruler's README example does the same).
* ``anything-but`` matches any present leaf that is not excluded, whatever its type: anything-but
  ``"x"`` matches ``5`` and null, and anything-but ``{"prefix": "x"}`` matches a number.
* ``anything-but`` with an empty list of prefixes (suffixes, ...) excludes nothing, as in Ruler.
* ``equals-ignore-case`` (and its prefix/suffix forms) compares ``str.lower()`` of both sides.
* ``cidr`` masks off host bits (``10.0.0.7/24`` is 10.0.0.0/24) and, like Ruler, refuses a mask of 32
  bits for IPv4 or 128 for IPv6. An event value that is not an IP address string never matches.
* ``$or`` needs at least two objects, and no operator name may be a field name inside one (Ruler).
* Not enforced: the 2048-character pattern size quota (adjustable), the 30-rules-with-wildcards quota per
  bus, and the wildcard "complexity" check. Operators the guide does not document (Ruler's ``exactly``)
  are refused.
"""

from __future__ import annotations

import ipaddress
import json
import operator
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

Predicate = Callable[[Any], bool]
EventMatcher = Callable[[dict[str, Any]], bool]
Path = tuple[str, ...]

# PutRule: "InvalidEventPatternException if the use of $or results in over 1000 rule combinations".
MAX_OR_COMBINATIONS = 1000
OR = "$or"
# Names Ruler refuses as field names inside a $or branch (its RESERVED_FIELD_NAMES_IN_OR_RELATIONSHIP).
RESERVED_IN_OR = frozenset(
    {
        "exactly",
        "equals-ignore-case",
        "prefix",
        "suffix",
        "anything-but",
        "exists",
        "wildcard",
        "numeric",
        "cidr",
        "=",
        "<",
        "<=",
        ">",
        ">=",
        "regex",
        "not-wildcard",
        "not-equals-ignore-case",
        "date-after",
        "date-on-or-after",
        "date-before",
        "date-on-or-before",
        "in-date-range",
        "ip-address-in-range",
        "ip-address-not-in-range",
    }
)
_MISSING: Any = object()  # an absent field, distinct from a JSON null


class InvalidPattern(ValueError):
    """An event pattern EventBridge would refuse at PutRule; the message says why (and where)."""

    def __init__(self, reason: str, path: Path = ()) -> None:
        self.reason = reason
        self.path = path
        where = f" (at {'.'.join(path)})" if path else ""
        super().__init__(f"Event pattern is not valid. Reason: {reason}{where}")


# Values --------------------------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float)  # bool is an int


def _scalars(values: list[Any]) -> Iterator[Any]:
    """The leaf values of an event array: nested arrays flattened, objects (not leaves) skipped."""
    for value in values:
        if isinstance(value, list):
            yield from _scalars(value)
        elif not isinstance(value, dict):
            yield value


# Operators: each compiles its argument into a predicate on one present leaf value -----------------


def _equals_any(values: list[Any]) -> Predicate:
    """Exact match against a list of JSON values: strings exactly, numbers numerically, and true, false
    and null only themselves (Python's ``True == 1`` must not leak in)."""
    strings = frozenset(v for v in values if isinstance(v, str))
    numbers = frozenset(v for v in values if _is_number(v))
    literals = tuple(v for v in values if v is None or isinstance(v, bool))

    def match(value: Any) -> bool:
        if isinstance(value, str):
            return value in strings
        if value is None or isinstance(value, bool):
            return any(value is literal for literal in literals)
        if isinstance(value, int | float):
            return value in numbers
        return False

    return match


def _affix(arg: Any, path: Path, name: str) -> Predicate:
    """``prefix`` / ``suffix``: a string, or ``{"equals-ignore-case": string}``."""
    if isinstance(arg, dict):
        if not arg:
            raise InvalidPattern(f"{name.capitalize()} expression name not found", path)
        if len(arg) > 1:
            raise InvalidPattern("Only one key allowed in match expression", path)
        ((inner, text),) = arg.items()
        if inner != "equals-ignore-case":
            raise InvalidPattern(f"Unsupported {name} pattern: {inner}", path)
        if not isinstance(text, str):
            raise InvalidPattern("equals-ignore-case match pattern must be a string", path)
        lowered = text.lower()
        if name == "prefix":
            return lambda v: isinstance(v, str) and v.lower().startswith(lowered)
        return lambda v: isinstance(v, str) and v.lower().endswith(lowered)
    if not isinstance(arg, str):
        raise InvalidPattern(f"{name} match pattern must be a string", path)
    if name == "prefix":
        return lambda v: isinstance(v, str) and v.startswith(arg)
    return lambda v: isinstance(v, str) and v.endswith(arg)


def _prefix(arg: Any, path: Path) -> Predicate:
    return _affix(arg, path, "prefix")


def _suffix(arg: Any, path: Path) -> Predicate:
    return _affix(arg, path, "suffix")


def _equals_ignore_case(arg: Any, path: Path) -> Predicate:
    if not isinstance(arg, str):
        raise InvalidPattern("equals-ignore-case match pattern must be a string", path)
    lowered = arg.lower()
    return lambda v: isinstance(v, str) and v.lower() == lowered


def _wildcard_regex(text: str, path: Path) -> re.Pattern[str]:
    """``*`` is any run of characters (none included); ``\\*`` and ``\\\\`` are a literal ``*`` and
    backslash; any other escape and two consecutive wildcards are refused (Ruler's WildcardParser; the
    positions it reports count the opening quote, hence ``i + 1``)."""
    pieces: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "*":
            if text[i + 1 : i + 2] == "*":
                raise InvalidPattern(f"Consecutive wildcard characters at pos {i + 1}", path)
            pieces.append(".*")
        elif char == "\\":
            following = text[i + 1 : i + 2]
            if following not in ("*", "\\"):
                raise InvalidPattern(f"Invalid escape character at pos {i + 1}", path)
            pieces.append(re.escape(following))
            i += 1
        else:
            pieces.append(re.escape(char))
        i += 1
    return re.compile("".join(pieces), re.DOTALL)


def _wildcard(arg: Any, path: Path) -> Predicate:
    if not isinstance(arg, str):
        raise InvalidPattern("wildcard match pattern must be a string", path)
    fullmatch = _wildcard_regex(arg, path).fullmatch
    return lambda v: isinstance(v, str) and fullmatch(v) is not None


def _anything_but(arg: Any, path: Path) -> Predicate:
    if isinstance(arg, dict):
        return _anything_but_of(arg, path)
    if isinstance(arg, list):
        if any(v is None or isinstance(v, bool | dict | list) for v in arg):
            raise InvalidPattern("Inside anything but list, start|null|boolean is not supported.", path)
        strings, numbers = any(isinstance(v, str) for v in arg), any(_is_number(v) for v in arg)
        if strings == numbers:  # both (mixed) or neither (empty)
            raise InvalidPattern(
                "Inside anything but list, either all values are number or string, mixed type is not "
                "supported",
                path,
            )
        excluded = _equals_any(arg)
    elif isinstance(arg, str) or _is_number(arg):
        excluded = _equals_any([arg])
    else:
        raise InvalidPattern("Value of anything-but must be an array or single string/number value.", path)
    return lambda v: not excluded(v)


def _starts_with(text: str) -> Predicate:
    return lambda v: v.startswith(text)


def _ends_with(text: str) -> Predicate:
    return lambda v: v.endswith(text)


def _full_match(regex: re.Pattern[str]) -> Predicate:
    return lambda v: regex.fullmatch(v) is not None


def _anything_but_of(arg: dict[str, Any], path: Path) -> Predicate:
    """``{"anything-but": {"prefix" | "suffix" | "equals-ignore-case" | "wildcard": str or [str]}}``."""
    if not arg:
        raise InvalidPattern("Anything-But expression name not found", path)
    if len(arg) > 1:
        raise InvalidPattern("Only one key allowed in anything-but expression", path)
    ((inner, value),) = arg.items()
    if inner not in ("prefix", "suffix", "equals-ignore-case", "wildcard"):
        raise InvalidPattern(f"Unsupported anything-but pattern: {inner}", path)
    if inner == "equals-ignore-case":
        not_a_string = (
            "Inside anything-but/equals-ignore-case list, number|start|null|boolean is not supported."
        )
    elif inner == "wildcard":
        not_a_string = "wildcard match pattern must be a string"
    else:
        not_a_string = "prefix/suffix match pattern must be a string"
    texts = value if isinstance(value, list) else [value]
    if not all(isinstance(t, str) for t in texts):
        raise InvalidPattern(not_a_string, path)
    if inner in ("prefix", "suffix") and "" in texts:
        raise InvalidPattern("Null prefix/suffix not allowed", path)
    tests: list[Predicate]
    if inner == "prefix":
        tests = [_starts_with(t) for t in texts]
    elif inner == "suffix":
        tests = [_ends_with(t) for t in texts]
    elif inner == "equals-ignore-case":
        lowered = frozenset(t.lower() for t in texts)
        tests = [lambda v: v.lower() in lowered]
    else:
        tests = [_full_match(_wildcard_regex(t, path)) for t in texts]
    # A non-string is none of these strings, so it is "anything but" them (see the module docstring).
    return lambda v: not (isinstance(v, str) and any(test(v) for test in tests))


_LOWER_BOUNDS: dict[str, Callable[[Any, Any], bool]] = {">": operator.gt, ">=": operator.ge}
_UPPER_BOUNDS: dict[str, Callable[[Any, Any], bool]] = {"<": operator.lt, "<=": operator.le}


def _numeric(arg: Any, path: Path) -> Predicate:
    """``["=", n]``, ``["<" | "<=", n]``, or ``[">" | ">=", a]`` optionally followed by ``"<" | "<=", b``
    with a < b: the grammar Ruler's compiler accepts (a range is lower bound first)."""
    if not isinstance(arg, list):
        raise InvalidPattern("Value of numeric must be an array.", path)
    if not arg or not isinstance(arg[0], str):
        raise InvalidPattern(f"Invalid member in numeric match: {arg[0] if arg else ']'}", path)
    first = arg[0]
    if first not in ("=", *_LOWER_BOUNDS, *_UPPER_BOUNDS):
        raise InvalidPattern(f"Unrecognized numeric range operator: {first}", path)
    if len(arg) < 2 or not _is_number(arg[1]):
        raise InvalidPattern(f"Value of {'equals' if first == '=' else first} must be numeric", path)
    bound = arg[1]
    if first == "=" or first in _UPPER_BOUNDS or len(arg) == 2:
        if len(arg) > 2:
            raise InvalidPattern("Too many elements in numeric expression", path)
        if first == "=":
            return lambda v: _is_number(v) and v == bound
        compare = _LOWER_BOUNDS.get(first) or _UPPER_BOUNDS[first]
        return lambda v: _is_number(v) and compare(v, bound)
    second = arg[2]
    if not isinstance(second, str):
        raise InvalidPattern(f"Bad value in numeric range: {second}", path)
    if second not in _UPPER_BOUNDS:
        raise InvalidPattern(f"Bad numeric range operator: {second}", path)
    if len(arg) < 4 or not _is_number(arg[3]):
        raise InvalidPattern(f"Value of {second} must be numeric", path)
    if len(arg) > 4:
        raise InvalidPattern("Too many terms in numeric range expression", path)
    top = arg[3]
    if top <= bound:
        raise InvalidPattern("Bottom must be less than top", path)
    above, below = _LOWER_BOUNDS[first], _UPPER_BOUNDS[second]
    return lambda v: _is_number(v) and above(v, bound) and below(v, top)


def _cidr(arg: Any, path: Path) -> Predicate:
    if not isinstance(arg, str):
        raise InvalidPattern("cidr match pattern must be a string", path)
    if arg.count("/") != 1:
        raise InvalidPattern("Malformed CIDR, one '/' required", path)
    address_text, bits_text = arg.split("/")
    try:
        bits = int(bits_text)
    except ValueError:
        raise InvalidPattern("Malformed CIDR, mask bits must be an integer", path) from None
    if bits < 0:
        raise InvalidPattern("Malformed CIDR, mask bits must not be negative", path)
    try:
        address = ipaddress.ip_address(address_text)
    except ValueError:
        raise InvalidPattern(f"Invalid IP address: {address_text}", path) from None
    if address.version == 4 and bits > 31:
        raise InvalidPattern("IPv4 mask bits must be < 32", path)
    if address.version == 6 and bits > 127:
        raise InvalidPattern("IPv6 mask bits must be < 128", path)
    network = ipaddress.ip_network(f"{address}/{bits}", strict=False)

    def match(value: Any) -> bool:
        if not isinstance(value, str):
            return False
        try:
            return ipaddress.ip_address(value) in network  # False across IP versions
        except ValueError:
            return False

    return match


_OPERATORS: dict[str, Callable[[Any, Path], Predicate]] = {
    "prefix": _prefix,
    "suffix": _suffix,
    "equals-ignore-case": _equals_ignore_case,
    "wildcard": _wildcard,
    "anything-but": _anything_but,
    "numeric": _numeric,
    "cidr": _cidr,
}


# Leaves: the list of alternatives a pattern gives one field --------------------------------------


@dataclass(frozen=True)
class _Leaf:
    exists_true: bool
    exists_false: bool
    predicate: Predicate | None  # any of the value alternatives

    def matches(self, value: Any) -> bool:
        """``value`` is what the event holds at this field (``_MISSING`` if nothing)."""
        if value is _MISSING or isinstance(value, dict):
            return self.exists_false
        if isinstance(value, list):
            leaves = list(_scalars(value))
            if not leaves:
                return self.exists_false
            if self.exists_true:
                return True
            predicate = self.predicate
            return predicate is not None and any(predicate(v) for v in leaves)
        if self.exists_true:
            return True
        return self.predicate is not None and self.predicate(value)


def _compile_leaf(alternatives: list[Any], path: Path) -> _Leaf:
    if not alternatives:
        raise InvalidPattern("Empty arrays are not allowed", path)
    exact: list[Any] = []
    predicates: list[Predicate] = []
    exists_true = exists_false = False
    for alternative in alternatives:
        if isinstance(alternative, dict):
            if not alternative:
                raise InvalidPattern("Match expression name not found", path)
            if len(alternative) > 1:
                raise InvalidPattern("Only one key allowed in match expression", path)
            ((name, arg),) = alternative.items()
            if name == "exists":
                if not isinstance(arg, bool):
                    raise InvalidPattern("exists match pattern must be either true or false.", path)
                exists_true, exists_false = exists_true or arg, exists_false or not arg
                continue
            compile_operator = _OPERATORS.get(name)
            if compile_operator is None:
                raise InvalidPattern(f"Unrecognized match type {name}", path)
            predicates.append(compile_operator(arg, path))
        elif _is_scalar(alternative):
            exact.append(alternative)
        else:
            raise InvalidPattern("Match value must be String, number, true, false, or null", path)
    if exact:
        predicates.insert(0, _equals_any(exact))
    predicate: Predicate | None
    if not predicates:
        predicate = None
    elif len(predicates) == 1:
        predicate = predicates[0]
    else:
        options = tuple(predicates)
        predicate = lambda v: any(p(v) for p in options)  # noqa: E731
    return _Leaf(exists_true, exists_false, predicate)


# Patterns: expand $or, then match each combination array-consistently -----------------------------

Rule = dict[Path, _Leaf]  # one $or-free combination: field path -> its leaf


def _expand(obj: dict[str, Any], path: Path, rules: list[Rule], in_or: bool) -> list[Rule]:
    """Add the fields of ``obj`` (at ``path``) to every rule, forking the rules at each ``$or``, in
    the pattern's key order so that a later key overrides an earlier one (as Ruler does)."""
    if not obj:
        raise InvalidPattern("Empty objects are not allowed", path)
    for key, value in obj.items():
        if key == OR:
            if not isinstance(value, list):
                raise InvalidPattern(f"It must be an Array followed with {OR}.", path)
            if not all(isinstance(branch, dict) for branch in value):
                raise InvalidPattern(f"Only JSON object is allowed in array of {OR} relationship.", path)
            if len(value) < 2:
                raise InvalidPattern(f"There must have at least 2 Objects in {OR} relationship.", path)
            forked: list[Rule] = []
            for branch in value:
                forked += _expand(branch, path, [dict(rule) for rule in rules], in_or=True)
                if len(forked) > MAX_OR_COMBINATIONS:
                    raise InvalidPattern(
                        f"the use of {OR} results in over {MAX_OR_COMBINATIONS} rule combinations", path
                    )
            rules = forked
            continue
        if in_or and key in RESERVED_IN_OR:
            raise InvalidPattern(f"{key} is Ruler reserved fieldName which cannot be used inside {OR}.", path)
        here = (*path, key)
        if isinstance(value, dict):
            rules = _expand(value, here, rules, in_or)
        elif isinstance(value, list):
            leaf = _compile_leaf(value, here)
            for rule in rules:
                rule[here] = leaf
        else:
            raise InvalidPattern(f'"{key}" must be an object or an array', path)
    return rules


@dataclass
class _Node:
    """A rule as a tree: the leaf the pattern gives this field (if any) and its sub-fields."""

    leaf: _Leaf | None = None
    fields: dict[str, _Node] = field(default_factory=dict)


def _tree(rule: Rule) -> _Node:
    root = _Node()
    for path, leaf in rule.items():
        node = root
        for key in path:
            node = node.fields.setdefault(key, _Node())
        node.leaf = leaf
    return root


def _node_matcher(node: _Node) -> Predicate:
    """A predicate on the event's value at this node (``_MISSING`` if absent)."""
    children = tuple((key, _node_matcher(child)) for key, child in node.fields.items())

    def fields_match(value: Any) -> bool:
        if isinstance(value, dict):
            get = value.get
            return all(match(get(key, _MISSING)) for key, match in children)
        if isinstance(value, list) and value:
            # each element on its own, so that sibling fields match within one element
            return any(fields_match(element) for element in value)
        return all(match(_MISSING) for _, match in children)

    leaf = node.leaf
    if leaf is None:
        return fields_match
    if not children:
        return leaf.matches
    return lambda value: leaf.matches(value) and fields_match(value)


def _compile(pattern: Any) -> EventMatcher:
    if not isinstance(pattern, dict):
        raise InvalidPattern("Filter is not an object")
    matchers = tuple(_node_matcher(_tree(rule)) for rule in _expand(pattern, (), [{}], in_or=False))
    if len(matchers) == 1:
        return matchers[0]
    return lambda event: any(match(event) for match in matchers)


def _reject_constant(name: str) -> Any:
    raise InvalidPattern(f"Filter is not valid JSON: {name} is not a JSON value")


@lru_cache(maxsize=1024)
def _compile_text(text: str) -> EventMatcher:
    try:
        pattern = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise InvalidPattern(f"Filter is not valid JSON: {exc}") from None
    return _compile(pattern)


def _pattern_text(pattern: Any) -> str:
    if isinstance(pattern, str):
        return pattern
    try:
        # key order kept: with $or, a later key overrides an earlier one
        return json.dumps(pattern, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidPattern(f"Filter is not valid JSON: {exc}") from None


# Public API ----------------------------------------------------------------------------------------


def compile_pattern(pattern: dict[str, Any] | str) -> EventMatcher:
    """A predicate for ``pattern`` (a dict or its JSON text, as in ``PutRule``'s ``EventPattern``).

    Validates first (``InvalidPattern``); compiled predicates are cached on the pattern's JSON text."""
    return _compile_text(_pattern_text(pattern))


def validate_pattern(pattern: Any) -> None:
    """Raise ``InvalidPattern`` if EventBridge's ``PutRule`` would refuse ``pattern`` (a dict or its
    JSON text)."""
    compile_pattern(pattern)


def pattern_matches(pattern: dict[str, Any] | str, event: dict[str, Any]) -> bool:
    """Whether EventBridge would deliver ``event`` to a rule with ``pattern`` (``InvalidPattern`` if the
    rule could not exist)."""
    return compile_pattern(pattern)(event)
