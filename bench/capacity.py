"""Capacity on paper: ``make capacity RATE=N [FLOW=payments]`` (``python -m bench.capacity --rate N``).

``make cost`` counts every request one operation of each flow makes (``.sandbox/cost.json``): the
meter's requests and billed units by caller, service and action, and the DynamoDB calls per table the
emulator authorized. Multiplied by a rate, those are the load on each resource; beside each load this
prints the AWS quota that applies (``bench/quotas.json``) or the Relay setting that caps it (the stage
config), the utilisation, the first limit to bind and its rate, the per-partition quotas above 50 %, the
quotas to raise and the Relay settings to change. How each load is modelled: docs/capacity.md.

What no run measures stays data: the quotas, the prices, and the key a table's items are written under
(``KEYS``). A request the model cannot place on a table, or a table ``KEYS`` does not know, is named
under ``unmapped`` (``unknown``; tests/e2e/test_capacity_routes_e2e.py fails on it).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
QUOTAS_PATH = ROOT / "bench" / "quotas.json"
PRICES_PATH = ROOT / "bench" / "prices.json"
COST_JSON = ROOT / ".sandbox" / "cost.json"

# A quota is planned to run at most this full: above it, raise it (to load / HEADROOM).
HEADROOM = 0.8
# The rule for per-partition limits: 10,000 operations/s stays under half of each.
PARTITION_WARNING = 0.5
INFINITE = math.inf
# The fixed-shard deadline index (relay.deadlines.INDEX_NAME): a table's writes above one unit an item go
# to it.
DEADLINE_INDEX = "due"


# -- inputs -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Quota:
    key: str
    value: float | None
    unit: str
    adjustable: bool
    scope: str  # partition | shard | resource | table | account
    source: str
    read: str
    note: str = ""


def load_quotas(path: Path = QUOTAS_PATH) -> dict[str, Quota]:
    raw = json.loads(path.read_text())["quotas"]
    return {
        key: Quota(
            key=key,
            value=None if entry["value"] is None else float(entry["value"]),
            unit=str(entry["unit"]),
            adjustable=bool(entry["adjustable"]),
            scope=str(entry["scope"]),
            source=str(entry["source"]),
            read=str(entry["read"]),
            note=str(entry.get("note", "")),
        )
        for key, entry in raw.items()
    }


@dataclass(frozen=True)
class Settings:
    """Relay's own settings that cap throughput, and where each is set."""

    stage: str
    # The deadline index's shard count (stage config payments.deadline_shards).
    deadline_shards: int
    # Every HTTP API's $default stage throttle (stage config http_api.*).
    api_throttle_rate: float
    api_throttle_burst: float
    # Every SQS consumer's event source (stage config consumers.*), and one consumer's own cap by
    # "<service>.<ConstructId>" (consumers.max_concurrency_by_consumer).
    max_concurrency: int
    batch_size: int
    batching_window_seconds: float
    # The scores API destination's connection rate limit (stage config scores.rate_limit_per_second).
    api_destination_rate: float
    # The share of operations that hit the busiest shared key (a SKU's stock, a customer's balance).
    hot_key_share: float = 1.0
    max_concurrency_by_consumer: Mapping[str, int] = field(default_factory=dict)

    def concurrency_of(self, function: str) -> tuple[int, str]:
        """A consumer's cap (``payments-PaymentWorker``) and the config key that sets it."""
        name = function.replace("-", ".", 1)
        if name in self.max_concurrency_by_consumer:
            return self.max_concurrency_by_consumer[name], f"consumers.max_concurrency_by_consumer.{name}"
        return self.max_concurrency, "consumers.max_concurrency"


def settings_for_stage(stage: str = "dev") -> Settings:
    """The stage's settings from cdk.json (validated by ``infra.config``) and the constructs' defaults."""
    sys.path.insert(0, str(ROOT))
    from infra.config import cdk_json_context, parse_stage_config

    context = cdk_json_context()
    config = parse_stage_config(stage, context.get("defaults") or {}, context.get("stages") or {})
    return Settings(
        stage=stage,
        deadline_shards=config.payments.deadline_shards,
        api_throttle_rate=float(config.http_api.throttle_rate),
        api_throttle_burst=float(config.http_api.throttle_burst),
        max_concurrency=config.consumers.max_concurrency,
        max_concurrency_by_consumer=dict(config.consumers.max_concurrency_by_consumer),
        batch_size=config.consumers.batch_size,
        batching_window_seconds=float(config.consumers.batching_window_seconds),
        api_destination_rate=float(config.scores.rate_limit_per_second),
    )


# -- DynamoDB: what each route wrote, from the measured run ---------------------------------------------


@dataclass(frozen=True)
class Key:
    """The key a table's items are written under; ``shared``: one key that many operations write (a
    SKU's stock, a customer's balance), not one item per operation."""

    pattern: str
    shared: bool = False


# Table (its name without ``relay-<stage>-``) -> the key its items are written under: what a measured
# run cannot say about DynamoDB (the meter counts units, not keys). A route that writes a table missing
# here is named by ``unknown`` (and fails tests/e2e/test_capacity_routes_e2e.py).
KEYS: dict[str, Key] = {
    "payments-operations": Key("OPERATION#<operationId>"),
    "payments-idempotency": Key("<notice idempotency key>"),
    "orders-orders": Key("ORDER#<orderId>"),
    "orders-inventory": Key("SKU#<sku> (stock)", shared=True),
    "orders-idempotency": Key("<notification idempotency key>"),
    # The balance and every order's accrual share the customer's partition (pk CUSTOMER#<customerId>).
    "loyalty-points": Key("CUSTOMER#<customerId>", shared=True),
    "reports-verifications": Key("REPORT#<reportId>"),
    "reports-idempotency": Key("<notification idempotency key>"),
    "scores-scores": Key("AGENT#<agentId> (snapshot)"),
    "scores-idempotency": Key("<the hour's snapshot job>"),
}

# The IAM actions one item of a transaction is authorized as (emulator.iam_requests), by request.
_ITEMS_OF = {
    "TransactWriteItems": ("PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem"),
    "TransactGetItems": ("GetItem",),
}
READS = frozenset({"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"})
_EPSILON = 1e-6


@dataclass(frozen=True)
class Route:
    """One function's requests of one DynamoDB action on one table, per operation, as measured: the
    items it wrote or read there (a transaction's entries on that table), the units billed for them,
    and of those the units that went to the table's deadline index."""

    function: str
    action: str
    table: str
    entries: float
    units: float
    index_units: float = 0.0


def _table(name: str) -> str:
    """'relay-dev-payments-operations' -> 'payments-operations'."""
    parts = name.split("-", 2)
    return parts[2] if name.startswith("relay-") and len(parts) == 3 else name


def _one_request_each(calls: Mapping[str, float], requests: float, shared: bool) -> dict[str, float] | None:
    """The tables a single-item action's ``requests`` went to, from its calls per table (one a request).
    ``shared``: a transaction of the same function is authorized as the same action, so only a set of
    tables whose calls add up to ``requests`` (exactly one such set), or the only table, is certain."""
    if not shared:
        return dict(calls)
    if len(calls) == 1:
        ((table, n),) = calls.items()
        return {table: requests} if n + _EPSILON >= requests else None
    names = sorted(calls)
    fits = [
        subset
        for size in range(1, len(names) + 1)
        for subset in itertools.combinations(names, size)
        if abs(sum(calls[t] for t in subset) - requests) < _EPSILON
    ]
    return {t: calls[t] for t in fits[0]} if len(fits) == 1 else None


def routes(
    flow_data: Mapping[str, Any], indexes: Mapping[str, Sequence[str]] | None = None
) -> tuple[list[Route], list[str]]:
    """Every (function, action, table) a measured flow touched, and what could not be placed.

    The meter gives each function's requests and billed units per action (``by_caller_per_operation``);
    the emulator's IAM report gives its calls per table (``table_calls_per_operation``: one per request
    of a single-item action, one per item of a transaction, on that item's table). A request's units are
    shared over its items; on a table with the deadline index (``relay.deadlines.INDEX_NAME``, from
    ``indexes``), what a write bills above one unit an item (two in a transaction) is the index's: the
    design keeps common-path items under 1 KB (DESIGN.md section 3)."""
    indexed = {_table(t) for t, names in (indexes or {}).items() if DEADLINE_INDEX in names}
    metered: dict[str, dict[str, tuple[float, float]]] = defaultdict(dict)
    for r in flow_data.get("by_caller_per_operation", []):
        if r["service"] == "dynamodb" and not r["caller"].startswith("glue:"):
            metered[function_of(r["caller"])][r["action"]] = (float(r["requests"]), float(r["billed"]))
    calls: dict[str, dict[tuple[str, str], float]] = defaultdict(lambda: defaultdict(float))
    # With the API operation of each call (the IAM report names it), a transaction's items are its own:
    # keyed by the transaction, they never mix with a single-item request of the same action.
    by_operation = any("operation" in c for c in flow_data.get("table_calls_per_operation", []))
    for c in flow_data.get("table_calls_per_operation", []):
        if c["action"] != "GetRecords":
            action = c["operation"] if c.get("operation") in _ITEMS_OF else c["action"]
            calls[function_of(c["function"])][(action, _table(c["table"]))] += float(c["calls"])
    found: list[Route] = []
    unplaced: list[str] = []

    def add(fn: str, action: str, per_table: Mapping[str, float], billed: float) -> None:
        total = sum(per_table.values())
        for table, entries in sorted(per_table.items()):
            units = billed * entries / total if total else 0.0
            index = 0.0
            if table in indexed and action not in READS:
                index = max(units - entries * (2 if action.startswith("Transact") else 1), 0.0)
            found.append(Route(fn, action, table, entries, units, index))

    for fn in sorted(set(metered) | set(calls)):
        left, actions = calls[fn], metered.get(fn, {})
        transacted = set() if by_operation else {a for t in actions if t in _ITEMS_OF for a in _ITEMS_OF[t]}
        for action, (requests, billed) in sorted(actions.items()):
            if action in _ITEMS_OF:
                continue
            tables = {t: n for (a, t), n in left.items() if a == action and n > _EPSILON}
            placed = _one_request_each(tables, requests, action in transacted)
            if not placed:
                unplaced.append(f"dynamodb {action} by {fn}: {billed:g} units on no table the calls tell")
                continue
            add(fn, action, placed, billed)
            for table, n in placed.items():
                left[(action, table)] -= n
        for action, (_requests, billed) in sorted(actions.items()):
            if action not in _ITEMS_OF:
                continue
            items: dict[str, float] = defaultdict(float)
            for (a, table), n in left.items():
                if (a == action or a in _ITEMS_OF[action]) and n > _EPSILON:
                    items[table] += n
                    left[(a, table)] = 0.0
            if items:
                add(fn, action, items, billed)
            else:
                unplaced.append(f"dynamodb {action} by {fn}: {billed:g} units on no table the calls tell")
        unplaced.extend(
            f"dynamodb {action} by {fn} on {table}: {n:g} calls no metered request explains"
            for (action, table), n in sorted(left.items())
            if n > _EPSILON
        )
    return found, unplaced


def unknown(flow_data: Mapping[str, Any], indexes: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """What the model does not know about a measured flow's DynamoDB requests: requests it could not
    place on a table, and tables without a ``KEYS`` entry."""
    found, unplaced = routes(flow_data, indexes)
    return unplaced + [
        f"dynamodb {r.action} by {r.function} on {r.table}: the table's key is not in KEYS"
        for r in found
        if r.table not in KEYS
    ]


_FUNCTION = re.compile(r"(?P<service>[a-z]+)-(?P<name>[A-Za-z0-9]+?)Function[0-9A-F]{8}\b")


def function_of(name: str) -> str:
    """'relay-dev-payments-ApiFunction6BF808ED' (or 'payments-ApiFunction6BF808ED', or the glue's
    'glue:esm (relay-dev-...)') -> 'payments-Api'; anything else is returned as it is."""
    found = _FUNCTION.search(name)
    return f"{found['service']}-{found['name']}" if found else name


def _inside(caller: str) -> str:
    """'glue:sns (relay-dev-payments-payment-events)' -> 'payments-payment-events'."""
    return _table(caller[caller.find("(") + 1 : caller.rfind(")")] if "(" in caller else caller)


# -- the model ----------------------------------------------------------------------------------------


def concurrency(rate: float, invocations_per_operation: float, duration_s: float) -> float:
    """Little's law: executions in flight = arrival rate x time each spends in the system."""
    return rate * invocations_per_operation * duration_s


def shard_load(rate: float, index_writes_per_operation: float, shards: int) -> float:
    """Write units per second on ONE partition of a fixed-shard index: shard values are assigned by a
    hash of the id, so each takes an even share."""
    return rate * index_writes_per_operation / shards


@dataclass(frozen=True)
class Limit:
    name: str  # a bench/quotas.json key, or a Relay setting
    value: float | None  # None: no documented number
    adjustable: bool
    scope: str
    source: str
    relay: bool = False  # a Relay setting (stage config / construct default), not an AWS quota


@dataclass
class Row:
    group: str
    resource: str
    metric: str
    # Load per operation (it scales with the rate), or, when ``scales`` is False, the load itself.
    per_operation: float
    limit: Limit | None
    scales: bool = True
    note: str = ""
    shard: bool = False  # one shard of a fixed-shard index: its load divides by the shard count

    def load(self, rate: float) -> float:
        return self.per_operation * rate if self.scales else self.per_operation

    def utilisation(self, rate: float) -> float | None:
        if self.limit is None or not self.limit.value:
            return None
        return self.load(rate) / self.limit.value

    def binds_at(self) -> float:
        """The rate at which the load reaches the limit (inf: never; 0: at any rate)."""
        if self.limit is None or not self.limit.value:
            return INFINITE
        if not self.scales:
            return 0.0 if self.per_operation >= self.limit.value else INFINITE
        return self.limit.value / self.per_operation if self.per_operation > 0 else INFINITE


def _aws(quotas: Mapping[str, Quota], key: str) -> Limit:
    quota = quotas[key]
    return Limit(key, quota.value, quota.adjustable, quota.scope, quota.source)


def _relay(name: str, value: float, scope: str, source: str) -> Limit:
    return Limit(name, value, True, scope, source, relay=True)


@dataclass
class Capacity:
    flow: str
    rate: float
    duration_ms: float
    settings: Settings
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unmapped: list[str] = field(default_factory=list)

    def first_to_bind(self, *, relay: bool) -> Row | None:
        candidates = [r for r in self.rows if r.limit is not None and r.limit.relay == relay]
        candidates = [r for r in candidates if r.binds_at() < INFINITE]
        return min(candidates, key=lambda r: r.binds_at(), default=None)

    def per_partition_above(self, threshold: float = PARTITION_WARNING) -> list[Row]:
        return [
            r
            for r in self.rows
            if r.limit is not None
            and not r.limit.relay
            and r.limit.scope in ("partition", "shard")
            and (r.utilisation(self.rate) or 0.0) > threshold
        ]

    def shards_needed(self, row: Row, target: float = PARTITION_WARNING) -> int:
        """The fewest shards that keep one shard of ``row``'s index at ``target`` of its limit or under."""
        assert row.shard and row.limit is not None and row.limit.value
        index_writes = row.per_operation * self.settings.deadline_shards
        return max(math.ceil(index_writes * self.rate / (target * row.limit.value) - 1e-9), 1)

    def to_raise(self, headroom: float = HEADROOM) -> list[tuple[Row, float]]:
        """Adjustable AWS quotas above ``headroom`` at this rate, with the value to request."""
        out = []
        for r in self.rows:
            if r.limit is None or r.limit.relay or not r.limit.adjustable:
                continue
            if (r.utilisation(self.rate) or 0.0) > headroom:
                out.append((r, request_value(r.load(self.rate), headroom)))
        return out

    def relay_changes(self, headroom: float = HEADROOM) -> list[tuple[Row, float]]:
        out = []
        for r in self.rows:
            if r.limit is not None and r.limit.relay and (r.utilisation(self.rate) or 0.0) > headroom:
                out.append((r, request_value(r.load(self.rate), headroom)))
        return out


def request_value(load: float, headroom: float = HEADROOM) -> float:
    """The value to ask for: the load at ``headroom``, rounded up to two significant digits."""
    needed = load / headroom
    if needed <= 0:
        return 0.0
    step = 10 ** max(math.floor(math.log10(needed)) - 1, 0)
    return float(math.ceil(needed / step - 1e-9) * step)


def _durations(default_ms: float, overrides: Mapping[str, float]) -> dict[str, float]:
    return defaultdict(lambda: default_ms, overrides)


def model(
    flow_data: Mapping[str, Any],
    *,
    flow: str,
    rate: float,
    duration_ms: float,
    settings: Settings,
    quotas: Mapping[str, Quota],
    function_durations_ms: Mapping[str, float] | None = None,
    prices: Mapping[str, Any] | None = None,
    indexes: Mapping[str, Sequence[str]] | None = None,
) -> Capacity:
    """The load on every resource a flow touches at ``rate`` operations per second, beside its limit
    (``indexes``: each table's global secondary indexes, as ``make cost`` records them)."""
    cap = Capacity(flow=flow, rate=rate, duration_ms=duration_ms, settings=settings)
    requests = list(flow_data.get("by_caller_per_operation", []))
    durations = _durations(duration_ms, function_durations_ms or {})
    _dynamodb(cap, flow_data, indexes, quotas)
    invocations = {
        function_of(k): float(v) for k, v in flow_data.get("invocations_per_operation", {}).items()
    }
    consumers = _lambda(cap, invocations, requests, durations, quotas)
    _sqs(cap, requests, {fn: invocations[fn] for fn in consumers if fn in invocations}, durations, quotas)
    _sns(cap, requests, quotas)
    _http(cap, flow_data, quotas)
    _events(cap, flow_data, requests, quotas, prices or {})
    _secrets_s3_streams(cap, requests, flow_data.get("table_calls_per_operation", []), quotas)
    cap.notes.append(
        "KMS: the SNS topics use SSE with the AWS managed key aws/sns, so SNS calls KMS for the account "
        f"(quota {quotas['kms.cryptographic.symmetric'].value:,.0f}/s shared, symmetric, us-east-1); the "
        "sandbox does not see those calls, so their rate is not modelled."
    )
    return cap


def _dynamodb(
    cap: Capacity,
    flow_data: Mapping[str, Any],
    indexes: Mapping[str, Sequence[str]] | None,
    quotas: Mapping[str, Quota],
) -> None:
    table_w: dict[str, float] = defaultdict(float)
    table_r: dict[str, float] = defaultdict(float)
    index_w: dict[str, float] = defaultdict(float)
    key_w: dict[tuple[str, Key], float] = defaultdict(float)
    key_r: dict[tuple[str, Key], float] = defaultdict(float)
    found, unplaced = routes(flow_data, indexes)
    cap.unmapped.extend(unplaced)
    for route in found:
        key = KEYS.get(route.table)
        if key is None:
            cap.unmapped.append(f"dynamodb {route.action} by {route.function} on {route.table}: key unknown")
            key = Key("(key unknown)")
        if route.action in READS:
            table_r[route.table] += route.units
            if route.action == "GetItem":  # a Query or Scan reads a range, not one key's item
                key_r[(route.table, key)] += route.units
        else:
            table_w[route.table] += route.units - route.index_units
            index_w[route.table] += route.index_units
            key_w[(route.table, key)] += route.units - route.index_units
    for table in sorted(set(table_w) | set(table_r)):
        for metric, units, name in (
            ("write units/s (table)", table_w[table], "dynamodb.table.write"),
            ("read units/s (table)", table_r[table], "dynamodb.table.read"),
        ):
            if units:
                cap.rows.append(Row("DynamoDB", table, metric, units, _aws(quotas, name)))
        warm = quotas["dynamodb.on_demand.warm_write"].value or 0.0
        if table_w[table] * cap.rate > warm:
            cap.notes.append(
                f"{table}: {table_w[table] * cap.rate:,.0f} WU/s is above a new on-demand table's warm "
                f"throughput ({warm:,.0f} WU/s): pre-warm it (WarmThroughput) before the traffic arrives."
            )
    shards = cap.settings.deadline_shards
    for table, units in sorted(index_w.items()):
        if not units:
            continue
        index = f"{table} index {DEADLINE_INDEX}"
        cap.rows.append(
            Row("DynamoDB", index, "write units/s (GSI)", units, _aws(quotas, "dynamodb.table.write"))
        )
        cap.rows.append(
            Row(
                "DynamoDB",
                f"{index}, one shard of {shards}",
                "write units/s (partition)",
                shard_load(1.0, units, shards),
                _aws(quotas, "dynamodb.partition.write"),
                note=f"{units:g} index writes per operation / {shards} shards (relay.deadlines)",
                shard=True,
            )
        )
    share = cap.settings.hot_key_share
    for loads, kind, quota in (
        (key_w, "write", "dynamodb.partition.write"),
        (key_r, "read", "dynamodb.partition.read"),
    ):
        for (table, key), units in sorted(loads.items(), key=lambda kv: (kv[0][0], kv[0][1].pattern)):
            if key.shared:
                cap.rows.append(
                    Row(
                        "DynamoDB",
                        f"{table} {key.pattern}",
                        f"{kind} units/s (shared key)",
                        units * share,
                        _aws(quotas, quota),
                        note=f"a key shared by operations; {share:.0%} of them on the busiest (--hot-share)",
                    )
                )
            else:
                cap.rows.append(
                    Row(
                        "DynamoDB",
                        f"{table} {key.pattern}",
                        f"{kind} units/s (one item, worst second)",
                        units,
                        _aws(quotas, quota),
                        scales=False,
                        note="one item per operation: its units, all in one second at worst, at any rate",
                    )
                )


def _lambda(
    cap: Capacity,
    invocations: Mapping[str, float],
    requests: Iterable[Mapping[str, Any]],
    durations: Mapping[str, float],
    quotas: Mapping[str, Quota],
) -> set[str]:
    """Per-function and account concurrency; returns the SQS consumers (functions an ESM polls for)."""
    consumers = {
        function_of(r["caller"])
        for r in requests
        if r["caller"].startswith("glue:esm")
        and r["service"] == "sqs"
        and float(r["requests"]) > float(r["empty"])
    }
    total = 0.0
    for fn, per_op in sorted(invocations.items()):
        seconds = durations[fn] / 1000
        per_rate = concurrency(1.0, per_op, seconds)
        total += per_rate
        limit = None
        if fn in consumers and per_op > 0:
            cap_value, key = cap.settings.concurrency_of(fn)
            limit = _relay(
                key,
                cap_value,
                "resource",
                f"cdk.json stages.{cap.settings.stage}.{key} "
                "(default infra/constructs/defaults.py ConsumerDefaults)",
            )
        cap.rows.append(
            Row(
                "Lambda",
                fn,
                "concurrent executions",
                per_rate,
                limit,
                note=f"{per_op:g} invocations/op x {durations[fn]:g} ms",
            )
        )
        needed = concurrency(cap.rate, per_op, seconds)
        ramp = quotas["lambda.scaling_rate"].value or 1.0
        if needed > ramp:
            cap.notes.append(
                f"{fn}: {needed:,.0f} concurrent executions take about {math.ceil(needed / ramp) * 10} s to "
                f"reach from cold (Lambda adds {ramp:,.0f} per function every 10 s)."
            )
    cap.rows.append(
        Row(
            "Lambda",
            "account (every function)",
            "concurrent executions",
            total,
            _aws(quotas, "lambda.concurrent_executions"),
            note="Little's law: rate x invocations/op x duration",
        )
    )
    return consumers


def _sqs(
    cap: Capacity,
    requests: Iterable[Mapping[str, Any]],
    consumers: Mapping[str, float],
    durations: Mapping[str, float],
    quotas: Mapping[str, Quota],
) -> None:
    """``consumers``: each SQS consumer's invocations per operation."""
    per_queue: dict[str, float] = defaultdict(float)
    for r in requests:
        if r["service"] != "sqs":
            continue
        # Empty receives are idle polling: they do not grow with the rate.
        name = f"queue of {function_of(r['caller'])}" if r["caller"].startswith("glue:esm") else None
        per_queue[name or f"sent by {function_of(r['caller'])}"] += float(r["requests"]) - float(r["empty"])
    for name, per_op in sorted(per_queue.items()):
        if per_op <= 0:  # a queue the flow does not use: its pollers' idle receives only
            continue
        cap.rows.append(Row("SQS", name, "requests/s", per_op, _aws(quotas, "sqs.standard.throughput")))
    s = cap.settings
    for fn, per_op in sorted(consumers.items()):
        seconds = s.batching_window_seconds + durations[fn] / 1000
        cap.rows.append(
            Row(
                "SQS",
                f"queue of {fn}",
                "in-flight messages (at most)",
                per_op * s.batch_size * seconds,
                _aws(quotas, "sqs.standard.in_flight"),
                note=f"invocations x batch {s.batch_size} x (window {s.batching_window_seconds:g} s + run)",
            )
        )


def _sns(cap: Capacity, requests: Iterable[Mapping[str, Any]], quotas: Mapping[str, Quota]) -> None:
    messages = 0.0
    bounds = []
    for r in requests:
        if r["service"] == "sns" and r["action"] in ("Publish", "PublishBatch"):
            if "entries" in r:  # the meter's message count, when cost.json carries it
                messages += float(r["entries"])
            elif r["action"] == "Publish":
                messages += float(r["requests"])
            else:  # the meter counts a PublishBatch's requests, not its messages
                per_batch = quotas["sns.publish_batch.entries"].value or 10.0
                messages += float(r["requests"]) * per_batch
                bounds.append(function_of(r["caller"]))
        elif r["service"] == "sns" and r["action"] == "Deliver to SQS":
            cap.rows.append(
                Row("SNS", _inside(r["caller"]), "deliveries to SQS/s", float(r["requests"]), None)
            )
        elif r["service"] == "sns" and r["action"] == "Deliver to Firehose":
            # SNS puts each message it delivers as one request of one record.
            stream = f"stream of {_inside(r['caller'])}"
            cap.rows.append(
                Row(
                    "Firehose",
                    stream,
                    "PutRecord(Batch) requests/s",
                    float(r["requests"]),
                    _aws(quotas, "firehose.direct_put.requests"),
                    note="one request per message SNS delivers",
                )
            )
        elif r["service"] == "firehose" and r["action"] == "Record bytes":
            cap.rows.append(
                Row(
                    "Firehose",
                    f"stream of {_inside(r['caller'])}",
                    "MiB/s",
                    float(r["billed"]) / 1024**2,
                    _aws(quotas, "firehose.direct_put.mib"),
                    note="the records' own bytes (ingestion is priced by 5 KB units)",
                )
            )
    if messages:
        note = "messages per operation as measured"
        if bounds:
            note = f"upper bound for {', '.join(bounds)}: 10 messages per PublishBatch"
        cap.rows.append(
            Row(
                "SNS",
                "account (every topic)",
                "messages published/s",
                messages,
                _aws(quotas, "sns.publish.messages"),
                note=note,
            )
        )


def _http(cap: Capacity, flow_data: Mapping[str, Any], quotas: Mapping[str, Quota]) -> None:
    total = 0.0
    for key, per_op in sorted(flow_data.get("invocations_per_operation", {}).items()):
        fn = function_of(key)
        if not fn.endswith("-Api"):
            continue
        total += float(per_op)
        s = cap.settings
        cap.rows.append(
            Row(
                "API Gateway",
                f"{fn.removesuffix('-Api')} HTTP API",
                "requests/s",
                float(per_op),
                _relay(
                    "HTTP API stage throttle",
                    s.api_throttle_rate,
                    "resource",
                    f"cdk.json stages.{s.stage}.http_api.throttle_rate (rate {s.api_throttle_rate:g}, "
                    f"burst {s.api_throttle_burst:g}; default infra/constructs/defaults.py HttpApiDefaults)",
                ),
                note="one API-function invocation per request",
            )
        )
    if total:
        cap.rows.append(
            Row(
                "API Gateway",
                "account (every API)",
                "requests/s",
                total,
                _aws(quotas, "apigateway.account.throttle"),
            )
        )


def _from_breakdown(
    flow_data: Mapping[str, Any], line: str, price_key: str, prices: Mapping[str, Any]
) -> float:
    """A per-operation count cost.json keeps only as dollars (its breakdown line / the unit price)."""
    usd = float(flow_data.get("breakdown_usd_per_million", {}).get(line, 0.0))
    entry = prices.get(price_key)
    if not usd or not entry or not float(entry["usd"]):
        return 0.0
    return usd / 1e6 / (float(entry["usd"]) / float(entry["per"]))


def _events(
    cap: Capacity,
    flow_data: Mapping[str, Any],
    requests: Iterable[Mapping[str, Any]],
    quotas: Mapping[str, Quota],
    prices: Mapping[str, Any],
) -> None:
    put = sum(
        float(r["requests"]) for r in requests if r["service"] == "events" and r["action"] == "PutEvents"
    )
    rules = sum(
        float(r["requests"]) for r in requests if r["service"] == "events" and r["action"] == "Deliver to SQS"
    )
    destination = _from_breakdown(
        flow_data, "EventBridge API destination calls", "events.api_destination", prices
    )
    if put:
        cap.rows.append(
            Row(
                "EventBridge",
                "account (every bus)",
                "PutEvents requests/s",
                put,
                _aws(quotas, "events.put_events"),
            )
        )
    if rules or destination:
        cap.rows.append(
            Row(
                "EventBridge",
                "account (every rule)",
                "invocations/s",
                rules + destination,
                _aws(quotas, "events.invocations"),
            )
        )
    if destination:
        cap.rows.append(
            Row(
                "EventBridge",
                "scores API destination",
                "invocations/s",
                destination,
                _relay(
                    "scores.rate_limit_per_second",
                    cap.settings.api_destination_rate,
                    "resource",
                    f"cdk.json stages.{cap.settings.stage}.scores.rate_limit_per_second "
                    "(AWS: 300/s per destination)",
                ),
            )
        )


def _secrets_s3_streams(
    cap: Capacity,
    requests: Sequence[Mapping[str, Any]],
    table_calls: Iterable[Mapping[str, Any]],
    quotas: Mapping[str, Quota],
) -> None:
    secrets = sum(
        float(r["requests"])
        for r in requests
        if r["service"] == "secretsmanager" and r["action"] == "GetSecretValue"
    )
    if secrets:
        cap.rows.append(
            Row(
                "Secrets Manager",
                "account",
                "GetSecretValue/s",
                secrets,
                _aws(quotas, "secretsmanager.get_secret_value"),
                note="as measured; cached per container, so an upper bound",
            )
        )
    for r in requests:
        if r["service"] != "s3":
            continue
        put = r["action"] in ("PutObject", "CopyObject", "DeleteObject", "POST")
        cap.rows.append(
            Row(
                "S3",
                f"objects of {function_of(r['caller'])}",
                f"{'PUT' if put else 'GET'} requests/s (one prefix)",
                float(r["requests"]),
                _aws(quotas, "s3.prefix.put" if put else "s3.prefix.get"),
                note="every request on one prefix: an upper bound",
            )
        )
    # A stream the flow writes: its mapping got records (an idle stream's GetRecords all come back empty).
    # Its reads are signed with the function's role, so the IAM report names the table they read.
    busy = {
        function_of(r["caller"])
        for r in requests
        if r["service"] == "dynamodbstreams" and float(r["requests"]) > float(r["empty"])
    }
    readers: dict[str, set[str]] = defaultdict(set)
    for c in table_calls:
        if c["action"] == "GetRecords" and function_of(c["function"]) in busy:
            readers[_table(c["table"])].add(function_of(c["function"]))
    for table, functions in sorted(readers.items()):
        cap.rows.append(
            Row(
                "DynamoDB Streams",
                f"{table} stream",
                "readers per shard",
                float(len(functions)),
                _aws(quotas, "dynamodb.streams.readers_per_shard"),
                scales=False,
                note="one Lambda mapping per stream; does not grow with the rate",
            )
        )


# -- output -------------------------------------------------------------------------------------------


def _n(x: float) -> str:
    if x == INFINITE:
        return "never"
    if x >= 100 or x == int(x):
        return f"{x:,.0f}"
    return f"{x:,.3g}"


def _pct(u: float | None) -> str:
    return "-" if u is None else f"{u:.1%}"


def render(cap: Capacity) -> str:
    lines = [
        f"capacity of flow {cap.flow} at {_n(cap.rate)} operations/s "
        f"(Lambda duration {cap.duration_ms:g} ms assumed; deadline shards {cap.settings.deadline_shards}; "
        f"stage {cap.settings.stage})",
        "",
    ]
    header = ("resource", "load", "per op", f"at {_n(cap.rate)}/s", "limit", "adj", "use", "binds at")
    table = [header]
    for r in cap.rows:
        lim = r.limit
        limit = "-" if lim is None else ("nearly unlimited" if lim.value is None else _n(lim.value))
        if lim is not None and lim.relay:
            limit += " (Relay)"
        table.append(
            (
                f"{r.group}: {r.resource}",
                r.metric,
                _n(r.per_operation) if r.scales else "(fixed)",
                _n(r.load(cap.rate)),
                limit,
                "-" if lim is None else ("yes" if lim.adjustable else "no"),
                _pct(r.utilisation(cap.rate)),
                _n(r.binds_at()) if lim is not None and lim.value else "-",
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for i, row in enumerate(table):
        cells = [
            c.ljust(w) if j < 2 else c.rjust(w) for j, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("")
    for relay, title in ((False, "first AWS quota to bind"), (True, "first Relay setting to bind")):
        first = cap.first_to_bind(relay=relay)
        if first is None or first.limit is None:
            lines.append(f"{title}: none")
        else:
            lines.append(
                f"{title}: {first.group}: {first.resource} ({first.metric}, limit "
                f"{_n(first.limit.value or 0)} {first.limit.name}) at {_n(first.binds_at())} operations/s"
            )
    hot = cap.per_partition_above()
    lines.append(
        f"per-partition quotas above {PARTITION_WARNING:.0%} at {_n(cap.rate)}/s:{'' if hot else ' none'}"
    )
    for r in hot:
        assert r.limit is not None
        lines.append(
            f"  {r.group}: {r.resource}: {_pct(r.utilisation(cap.rate))} of {_n(r.limit.value or 0)} "
            f"{r.metric}"
        )
        if r.shard:
            lines.append(
                f"    -> {cap.shards_needed(r)} shards keep it at {PARTITION_WARNING:.0%} or under "
                f"at {_n(cap.rate)}/s"
            )
    raises = cap.to_raise()
    lines.append(
        f"AWS quotas to raise at {_n(cap.rate)}/s (above {HEADROOM:.0%}):{'' if raises else ' none'}"
    )
    for r, value in raises:
        assert r.limit is not None
        lines.append(
            f"  {r.limit.name} (per {r.limit.scope}; {r.group}: {r.resource}): {_n(r.limit.value or 0)} "
            f"-> request {_n(value)}"
        )
    # One setting can cap several resources (consumers.max_concurrency: every consumer): the largest need.
    changes: dict[str, tuple[float, float, list[str]]] = {}
    for r, value in cap.relay_changes():
        assert r.limit is not None
        current, needed, where = changes.get(r.limit.name, (r.limit.value or 0.0, 0.0, []))
        changes[r.limit.name] = (current, max(needed, value), [*where, r.resource])
    lines.append(
        f"Relay settings to change at {_n(cap.rate)}/s (above {HEADROOM:.0%}):{'' if changes else ' none'}"
    )
    for name, (current, needed, where) in changes.items():
        lines.append(f"  {name}: {_n(current)} -> at least {_n(needed)} ({', '.join(where)})")
    if cap.unmapped:
        lines.append("unmapped (counted, key unknown): " + "; ".join(cap.unmapped))
    for note in cap.notes:
        lines.append(f"note: {note}")
    sources = sorted({(r.limit.name, r.limit.source) for r in cap.rows if r.limit is not None})
    lines.append("limits:")
    lines.extend(f"  {name}: {source}" for name, source in sources)
    return "\n".join(lines)


def as_json(cap: Capacity) -> dict[str, Any]:
    def row(r: Row) -> dict[str, Any]:
        return {
            "group": r.group,
            "resource": r.resource,
            "metric": r.metric,
            "per_operation": r.per_operation,
            "scales_with_rate": r.scales,
            "load_per_second": r.load(cap.rate),
            "limit": None if r.limit is None else asdict(r.limit),
            "utilisation": r.utilisation(cap.rate),
            "binds_at_rate": None if r.binds_at() == INFINITE else r.binds_at(),
            "note": r.note,
        }

    def first(relay: bool) -> dict[str, Any] | None:
        found = cap.first_to_bind(relay=relay)
        return None if found is None else {**row(found), "rate": found.binds_at()}

    return {
        "flow": cap.flow,
        "rate": cap.rate,
        "duration_ms_assumed": cap.duration_ms,
        "settings": asdict(cap.settings),
        "rows": [row(r) for r in cap.rows],
        "first_to_bind": {"aws": first(False), "relay": first(True)},
        "per_partition_above_50_percent": [
            {**row(r), **({"shards_needed": cap.shards_needed(r)} if r.shard else {})}
            for r in cap.per_partition_above()
        ],
        "quotas_to_raise": [{**row(r), "request": v} for r, v in cap.to_raise()],
        "relay_settings_to_change": [{**row(r), "at_least": v} for r, v in cap.relay_changes()],
        "unmapped": cap.unmapped,
        "notes": cap.notes,
    }


def _overrides(values: Sequence[str]) -> dict[str, float]:
    out = {}
    for value in values:
        name, _, ms = value.partition("=")
        if not ms:
            raise SystemExit(
                f"--function-duration takes FUNCTION=MS (e.g. payments-PaymentWorker=500), not {value!r}"
            )
        out[name] = float(ms)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make capacity", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, required=True, help="operations per second")
    parser.add_argument("--flow", default="payments")
    parser.add_argument("--json", type=Path, default=COST_JSON, help="make cost's figures")
    parser.add_argument("--json-out", type=Path, help="write the model as JSON here ('-': stdout)")
    parser.add_argument(
        "--stage", default="dev", help="the stage config (cdk.json) to read Relay's settings from"
    )
    parser.add_argument(
        "--shards", type=int, help="deadline index shards (default: the stage's payments.deadline_shards)"
    )
    parser.add_argument(
        "--duration-ms", type=float, help="every invocation's duration (default: cost.json's)"
    )
    parser.add_argument("--function-duration", action="append", default=[], metavar="FUNCTION=MS")
    parser.add_argument(
        "--hot-share", type=float, default=1.0, help="share of operations on the busiest shared key"
    )
    args = parser.parse_args(argv)
    if args.rate <= 0:
        parser.error("--rate must be above 0")
    if not args.json.exists():
        print(
            f"error: {args.json} not found. The model multiplies the requests per operation that `make cost` "
            "measures: run `make cost` first (it writes .sandbox/cost.json).",
            file=sys.stderr,
        )
        return 2
    cost = json.loads(args.json.read_text())
    flows = cost.get("flows", {})
    if args.flow not in flows:
        print(
            f"error: flow {args.flow!r} is not in {args.json} (it has: {', '.join(sorted(flows)) or 'none'})",
            file=sys.stderr,
        )
        return 2
    try:
        settings = settings_for_stage(args.stage)
    except Exception as exc:  # infra.config.ConfigError: an unknown stage, an invalid cdk.json
        print(f"error: the stage config for {args.stage!r}: {exc}", file=sys.stderr)
        return 2
    settings = Settings(
        **{
            **asdict(settings),
            "deadline_shards": args.shards or settings.deadline_shards,
            "hot_key_share": args.hot_share,
        }
    )
    prices = json.loads(PRICES_PATH.read_text())["prices"]
    cap = model(
        flows[args.flow],
        flow=args.flow,
        rate=args.rate,
        duration_ms=args.duration_ms or float(cost.get("duration_ms_assumed", 60.0)),
        settings=settings,
        quotas=load_quotas(),
        function_durations_ms=_overrides(args.function_duration),
        prices=prices,
        indexes=cost.get("indexes"),
    )
    text = json.dumps(as_json(cap), indent=2) + "\n"
    if args.json_out and str(args.json_out) == "-":  # the JSON alone, for a pipe
        sys.stdout.write(text)
        return 0
    print(render(cap))
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(text)
        print(f"model written to {args.json_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
