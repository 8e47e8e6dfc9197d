"""JSON from outside (an HTTP body, a queue message): parsed within limits, or refused as InvalidInput.

``json.loads`` accepts input that breaks code far from the parse, where the failure no longer looks like
bad input (an HTTP 500; a message retried until the redrive policy moves it, with no reason attached):

* nesting deeper than the interpreter's recursion limit raises ``RecursionError``, not a
  ``JSONDecodeError`` (100,000 ``[`` is 100 KB); a few hundred levels parse, then pydantic refuses to
  serialise them (``PydanticSerializationError`` at depth ~300) and DynamoDB refuses maps nested
  deeper than 32;
* an integer longer than 4,300 digits raises ``ValueError`` (CPython's int/str conversion limit);
* ``NaN``, ``Infinity`` and ``1e999`` are not JSON (RFC 8259), yet parse into floats that
  ``json.dumps`` writes back as text no JSON parser reads;
* ``"\\ud800"`` (an escaped lone surrogate) is valid JSON syntax but parses into a ``str`` that cannot
  be encoded as UTF-8: the first hash, ``.encode()`` or boto3 call raises ``UnicodeEncodeError``;
* bytes that are not UTF-8 (RFC 8259 8.1: JSON exchanged between systems is UTF-8).

``loads`` turns each of these into an ``InvalidInput`` (permanent: the same bytes fail the same way)
that says which rule the input broke, never echoing the input itself.
"""

from __future__ import annotations

import json
import math
from typing import Any

from relay.errors import InvalidInput

# Enough for every Relay envelope (an API body of MAX_DEPTH 32 plus the envelope around it), far below
# the interpreter's recursion limit and the depth at which pydantic stops serialising.
MAX_DEPTH = 64


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (RFC 8259)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range (beyond ±1.8e308)")
    return value


def loads(data: str | bytes, *, what: str, max_depth: int = MAX_DEPTH) -> Any:
    """Parse ``data`` as JSON; ``InvalidInput`` naming ``what`` when it is not JSON this code can use."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(
                f"{what} is not UTF-8 text (invalid byte 0x{data[exc.start]:02x} at offset {exc.start})"
            ) from None
    else:
        text = data
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"{what} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except RecursionError:
        raise InvalidInput(f"{what} is JSON nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # integer digit limit, NaN/Infinity, a float out of range
        raise InvalidInput(f"{what} is not usable JSON: {str(exc)[:160]}") from None
    _check(value, what=what, max_depth=max_depth)
    return value


def _check(value: Any, *, what: str, max_depth: int) -> None:
    """Depth and text of a parsed document, iteratively (a recursive walk would hit the limit it checks)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            if depth + 1 > max_depth:
                raise InvalidInput(f"{what} is JSON nested deeper than {max_depth} levels")
            for key, item in node.items():
                _check_text(key, what)
                stack.append((item, depth + 1))
        elif isinstance(node, list):
            if depth + 1 > max_depth:
                raise InvalidInput(f"{what} is JSON nested deeper than {max_depth} levels")
            stack.extend((item, depth + 1) for item in node)
        elif isinstance(node, str):
            _check_text(node, what)


def _check_text(text: str, what: str) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        raise InvalidInput(
            f"{what} holds a lone surrogate (\\u{code:04x}) in a string: that is not Unicode text"
        ) from None
