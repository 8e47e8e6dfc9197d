"""What the emulator counts as it serves: the request meter's entries, and the bus rules' outcomes.

A leaf module: the IAM enforcer, the bus delivery and the meter all count here, and none of them
imports another to do it. ``emulator.request_meter`` serves the meter's entries at ``/_relay/meter``;
the enforcer's control path ``bus`` serves the rules' outcomes.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

_lock = threading.Lock()
# (caller, service, action) -> {"requests": n, "billed": units, "empty": n}
_counts: dict[tuple[str, str, str], dict[str, float]] = {}
_rules: Counter[tuple[str, str]] = Counter()  # (rule name, outcome) -> count


def add(
    caller: str,
    service: str,
    action: str,
    *,
    requests: int = 1,
    billed: float = 1.0,
    empty: int = 0,
    entries: int | None = None,
) -> None:
    """``entries``: the messages, events or items the requests carried (a PublishBatch's entries, a
    ReceiveMessage's messages, a transaction's items); one a request when not given."""
    with _lock:
        entry = _counts.setdefault(
            (caller, service, action), {"requests": 0, "billed": 0.0, "empty": 0, "entries": 0}
        )
        entry["requests"] += requests
        entry["billed"] += billed
        entry["empty"] += empty
        entry["entries"] += requests if entries is None else entries


def delivered(service: str, source_arn: str) -> None:
    """A delivery the service makes inside AWS (SNS to a subscribed queue, a bus rule to its target
    queue): no HTTP request the meter could see, counted here by the code that delivers."""
    add(f"glue:{service} ({source_arn.rsplit(':', 1)[-1]})", service, "Deliver to SQS", billed=1.0)


def snapshot() -> list[dict[str, Any]]:
    with _lock:
        return [
            {"caller": c, "service": s, "action": a, **{k: v for k, v in entry.items()}}
            for (c, s, a), entry in sorted(_counts.items())
        ]


def reset() -> None:
    with _lock:
        _counts.clear()


def rule_outcome(rule: str, outcome: str) -> None:
    with _lock:
        _rules[(rule, outcome)] += 1


def rule_outcomes() -> dict[str, dict[str, int]]:
    """Per rule: matched, delivered, dead-lettered, dropped, unsupported (counts since start)."""
    with _lock:
        out: dict[str, dict[str, int]] = {}
        for (rule, outcome), n in _rules.items():
            out.setdefault(rule, {})[outcome] = n
        return out


def clear_rules() -> None:
    with _lock:
        _rules.clear()
