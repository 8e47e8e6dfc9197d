"""An item's size as DynamoDB bills it, by the documented rule
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html):
names and strings in UTF-8 bytes, a number 1 byte per two significant digits plus 1, a list or map
3 bytes plus 1 per element. A write bills 1 unit per started KB of the larger image, before or after."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

KB = 1024


def value_size(value: Mapping[str, Any]) -> int:
    """The size of one attribute value in DynamoDB JSON (``{"S": ...}``, ``{"L": [...]}``...)."""
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(str(raw).encode("utf-8"))
    if kind == "N":
        digits = str(raw).lstrip("-").replace(".", "").strip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if kind == "B":
        return len(raw)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in raw)
    if kind == "M":
        return 3 + sum(1 + len(k.encode("utf-8")) + value_size(v) for k, v in raw.items())
    if kind in ("SS", "NS", "BS"):
        return sum(value_size({kind[0]: v}) for v in raw)
    raise ValueError(f"unknown attribute type {kind}")


def item_size(image: Mapping[str, Mapping[str, Any]]) -> int:
    """The size of an item in DynamoDB JSON, as a stream image carries it."""
    return sum(len(name.encode("utf-8")) + value_size(value) for name, value in image.items())


def parts(image: Mapping[str, Mapping[str, Any]]) -> list[tuple[int, str]]:
    """Each attribute's share, largest first: what a failing size check prints."""
    return sorted(((len(k.encode("utf-8")) + value_size(v), k) for k, v in image.items()), reverse=True)
