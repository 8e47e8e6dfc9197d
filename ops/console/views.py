"""What the console's pages show, as JSON documents: each one is a call into the code ``python -m ops``
runs (``ops.lookup``, ``ops.status``, ``ops.ledger``, ``emulator.iam_report``, the request meter priced by
``bench.pricing``), so the page and the command line cannot disagree.

Nothing here receives from a queue: queue depths are attributes (``ops.status.take_snapshot``) and the
parked messages are the parked ledger's entries (``ops.ledger.entries_of_queue``), which the kernel writes
when it parks. Only the redrive (``ops.console.jobs``) receives, and only when the console allows it.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.request
from collections import Counter, deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ops.app import App, OpsError
from ops.ledger import entries_of_queue
from ops.lookup import SEARCH_SCAN_LIMIT, describe_operation, describe_order, find_operations, find_orders
from ops.status import take_snapshot

# The latency chart's bucket edges (seconds from the 202 to the terminal state).
LATENCY_EDGES = (1, 2, 5, 10, 30, 60, 300, 1800, 3600)


class NotFound(Exception):
    """What a page asked for does not exist (HTTP 404)."""


def operations(app: App, text: str, limit: int) -> dict[str, Any]:
    return {"query": text, "operations": find_operations(app, text, limit=limit)}


def operation(app: App, operation_id: str) -> dict[str, Any]:
    view = describe_operation(app, operation_id)
    if view is None:
        raise NotFound(f"no operation {operation_id} in {app.name('payments', 'operations')}")
    return {**view, "terminal": _payments_terminal(str(view.get("status")))}


def trace(app: App, operation_id: str) -> dict[str, Any]:
    """An operation's trace as the sandbox's collector has it (``emulator.traces.operation_trace``): each
    trace's spans in start order, with their depth under their parent and their start from the trace's
    start, for a waterfall. On AWS the spans are in CloudWatch; the page says where to look."""
    if not app.is_local:
        return {
            "available": False,
            "note": "On AWS the spans are in CloudWatch (Transaction Search, or X-Ray traces): search "
            "annotation.correlation_id for the operation's correlation id.",
            "traces": [],
        }
    from emulator.traces import operation_trace

    found = operation_trace(str(app.endpoint_url), operation_id=operation_id)
    return {"available": True, "traces": [_waterfall(t) for t in found]}


def _waterfall(found: dict[str, Any]) -> dict[str, Any]:
    from bench.capacity import (
        function_of,
    )  # relay-dev-payments-PaymentWorkerFunction4E210E59 -> payments-PaymentWorker

    spans = found["spans"]
    by_id = {s["spanId"]: s for s in spans}

    def depth(span: dict[str, Any]) -> int:
        seen, level = set(), 0
        while span.get("parentSpanId") in by_id and span["spanId"] not in seen:
            seen.add(span["spanId"])
            span, level = by_id[span["parentSpanId"]], level + 1
        return level

    start = min(s["start"] for s in spans)
    end = max(s["end"] for s in spans)
    return {
        "traceId": found["traceId"],
        "durationMs": round((end - start) / 1e6, 3),
        "functions": sorted({function_of(s["function"]) for s in spans if s.get("function")}),
        "spans": [
            {
                "name": s["name"],
                "service": s.get("service"),
                "function": function_of(s["function"]) if s.get("function") else None,
                "kind": s["kind"],
                "status": s["status"],
                "depth": depth(s),
                "offsetMs": round((s["start"] - start) / 1e6, 3),
                "durationMs": s["durationMs"],
                "correlationId": s["correlationId"],
                "orphan": bool(s.get("parentSpanId")) and s["parentSpanId"] not in by_id,
            }
            for s in spans
        ],
    }


def orders(app: App, text: str, limit: int) -> dict[str, Any]:
    return {"query": text, "orders": find_orders(app, text, limit=limit)}


def order(app: App, order_id: str) -> dict[str, Any]:
    view = describe_order(app, order_id)
    if view is None:
        raise NotFound(f"no order {order_id} in {app.name('orders', 'orders')}")
    return view


def queues(app: App) -> dict[str, Any]:
    """``ops status --json``, with each DLQ's parked messages as the ledger has them (no receive)."""
    snapshot = take_snapshot(app)
    document = snapshot.to_json()
    by_name = {s.queue.name: s.queue for s in snapshot.queues}
    for dlq in document["dlqs"]:
        info = by_name[dlq["name"]]
        dlq["short"] = info.short
        dlq["sources"] = list(info.sources)
        dlq["parked"] = [
            _parked_row(entry)
            for source in info.sources
            for entry in entries_of_queue(app, source)
            if entry.get("dlq") in (None, info.name)
        ]
    for queue in document["queues"]:
        info = by_name[queue["name"]]
        queue["short"] = info.short
        queue["dlq"] = info.dlq.name if info.dlq else None
    return document


def alarms(app: App) -> dict[str, Any]:
    """Every alarm of the stage with its state and the runbook commands its description names, those in
    ALARM first: what ``ops status`` lists (``ops.status.take_snapshot``)."""
    document = take_snapshot(app).to_json()
    return {
        "alarms": document.get("alarms", []),
        "runbook": document.get("runbook"),
        "declaredOnly": document.get("alarmsDeclaredOnly", 0),
        "takenAt": document["takenAt"],
    }


def parked(app: App, dlq_name: str) -> dict[str, Any]:
    """One DLQ: its depth and the ledger's entries of the queues that park into it."""
    try:
        dlq = app.find_queue(dlq_name, dlq=True)
    except OpsError as exc:
        raise NotFound(str(exc)) from None
    entries = [
        _parked_row(entry)
        for source in dlq.sources
        for entry in entries_of_queue(app, source)
        if entry.get("dlq") in (None, dlq.name)
    ]
    return {
        "name": dlq.name,
        "short": dlq.short,
        "sources": list(dlq.sources),
        "visible": dlq.visible,
        "inFlight": dlq.in_flight,
        "parked": entries,
    }


def _parked_row(entry: dict[str, Any]) -> dict[str, Any]:
    keep = (
        "status",
        "sourceQueue",
        "dlq",
        "messageId",
        "errorClass",
        "errorMessage",
        "parkedAt",
        "eventId",
        "eventType",
        "correlationId",
        "entity",
        "ids",
        "redrivenAt",
        "redriveReason",
    )
    return {name: entry.get(name) for name in keep if entry.get(name) is not None}


# -- the sandbox's own reports -----------------------------------------------------------------------


def _local_only(app: App, what: str) -> str:
    if not app.is_local or not app.endpoint_url:
        raise NotFound(f"{what} is the local sandbox's (its emulator records it); this console reads AWS")
    return app.endpoint_url


def iam(app: App) -> dict[str, Any]:
    """``python -m local iam-report``'s report: per function, calls allowed and denied, grants unused."""
    from emulator.iam_report import fetch_report, format_report

    report = fetch_report(_local_only(app, "the IAM report"))
    functions = []
    for fn in sorted(report["functions"], key=lambda f: str(f["function"])):
        grants = fn["grants"]
        functions.append(
            {
                "function": fn["function"],
                "allowed": sum(fn["calls"].values()),
                "denied": dict(sorted(fn["denied"].items())),
                "used": sum(1 for g in grants if g["uses"]),
                "unused": [
                    {"action": g["action"], "resource": g["resource"]}
                    for g in grants
                    if not g["uses"] and not g["action"].startswith("logs:")
                ],
            }
        )
    return {
        "functions": functions,
        "serviceDenials": report.get("serviceDenials", {}),
        "summary": format_report(report)[-1],
    }


def meter(app: App, operations_so_far: int | None = None) -> dict[str, Any]:
    """Every AWS request the app made so far (its functions and the glue acting for them), priced with
    ``bench/prices.json`` by the rule ``make cost`` uses (``bench.pricing.billed_as``), and that total
    per payment operation accepted. Lambda duration and logs are not in it (the meter counts requests)."""
    from bench.pricing import billed_as, price
    from emulator.request_meter import PATH

    endpoint = _local_only(app, "the request meter")
    with urllib.request.urlopen(f"{endpoint}{PATH}", timeout=30) as answer:  # noqa: S310 (loopback)
        rows: list[dict[str, Any]] = json.loads(answer.read())
    lines: dict[str, dict[str, float]] = {}
    for row in rows:
        if row["caller"] == "other":
            # Not the app's: provisioning, the demo's driver, ops and this console's own reads (make cost
            # leaves them out the same way).
            continue
        billed = float(row.get("billed", 0)) - float(row.get("empty", 0))  # idle polling is not per operation
        line, key = billed_as(str(row["service"]), str(row["action"]), str(row["caller"]))
        entry = lines.setdefault(line, {"requests": 0.0, "usd": 0.0})
        entry["requests"] += float(row.get("requests", 0))
        entry["usd"] += price(key, billed) if key else 0.0
    total = sum(e["usd"] for e in lines.values())
    count = operations_so_far
    if count is None:
        count = len(find_operations(app, "", limit=SEARCH_SCAN_LIMIT))
    return {
        "operations": count,
        "totalUsd": total,
        "usdPerOperation": total / count if count else None,
        "usdPerMillionOperations": total / count * 1_000_000 if count else None,
        "lines": sorted(
            ({"line": k, **v} for k, v in lines.items()), key=lambda e: (-e["usd"], -e["requests"])
        ),
        "note": "the app's requests (its functions' and the managed glue's) priced at list prices "
        "(bench/prices.json); provisioning, ops and this console's reads, Lambda duration and logs "
        "are not in it",
    }


# -- over time -----------------------------------------------------------------------------------------


def latency(app: App, terminal: Callable[[str], bool] | None = None) -> dict[str, Any]:
    """From the 202 (``createdAt``) to the terminal state (its ``updatedAt``), per terminal operation,
    bucketed by ``LATENCY_EDGES``."""
    is_terminal = terminal or _payments_terminal
    seconds = []
    for row in find_operations(app, "", limit=SEARCH_SCAN_LIMIT):
        if not row.get("status") or not is_terminal(str(row["status"])):
            continue
        start, end = _moment(row.get("createdAt")), _moment(row.get("updatedAt"))
        if start and end:
            seconds.append(max((end - start).total_seconds(), 0.0))
    counts = [0] * (len(LATENCY_EDGES) + 1)
    for value in seconds:
        counts[next((i for i, edge in enumerate(LATENCY_EDGES) if value <= edge), len(LATENCY_EDGES))] += 1
    labels = [f"≤ {_short(e)}" for e in LATENCY_EDGES] + [f"> {_short(LATENCY_EDGES[-1])}"]
    ordered = sorted(seconds)
    return {
        "buckets": [{"label": label, "count": c} for label, c in zip(labels, counts, strict=True)],
        "count": len(seconds),
        "p50": _quantile(ordered, 0.5),
        "p95": _quantile(ordered, 0.95),
        "max": ordered[-1] if ordered else None,
    }


def _payments_terminal(status: str) -> bool:
    from payments.operations import Status

    try:
        return bool(Status(status).terminal)
    except ValueError:
        return False


def _quantile(ordered: list[float], q: float) -> float | None:
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _short(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds} s"
    return f"{seconds // 60} min" if seconds < 3600 else f"{seconds // 3600} h"


def _moment(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


class History:
    """Samples taken every ``interval`` seconds while the console runs (the charts' points): payment
    operations per state and each queue's depth, read as the pages read them. At most ``keep`` samples."""

    def __init__(self, app: App, *, interval: float = 5.0, keep: int = 720) -> None:
        self.app = app
        self.interval = interval
        self.samples: deque[dict[str, Any]] = deque(maxlen=keep)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="console-history", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()

    def sample(self) -> dict[str, Any]:
        rows = find_operations(self.app, "", limit=SEARCH_SCAN_LIMIT)
        states = Counter(str(r["status"]) for r in rows if r.get("status"))
        depths = {
            q.short or q.name: q.visible + q.in_flight + q.delayed for q in self.app.queues() if q.short
        }
        at = datetime.now(UTC).isoformat(timespec="seconds")
        point = {"at": at, "states": dict(states), "depths": depths}
        with self._lock:
            self.samples.append(point)
        return point

    def points(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.samples)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            # The emulator stopping, or busy for a moment: the next sample tries again.
            with contextlib.suppress(Exception):
                self.sample()
            self._stop.wait(max(0.5, self.interval - (time.monotonic() - started)))
