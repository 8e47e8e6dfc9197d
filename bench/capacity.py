"""Capacity on paper: ``make capacity RATE=N [FLOW=payments]`` (``python -m bench.capacity --rate N``).

Nothing here can load AWS, but ``make cost`` counted every request one operation of each flow makes,
by caller, service and action (``.sandbox/cost.json``). Multiplied by a rate, those counts are the
load on each resource; beside each load this prints the AWS quota that applies (``bench/quotas.json``:
value, adjustable or not, scope, source, date read), or the Relay setting that caps it (the stage
config and the constructs' defaults), and the utilisation. Then: the first limit to bind and the rate
at which it binds (the rate at which the tightest one reaches 100 %), the per-partition quotas above
50 %, the quotas a user must raise (with the value to request) and the Relay settings to change.

How each load is modelled:

* **DynamoDB tables** (``dynamodb.table.*``, per on-demand table and separately per GSI): the write
  and read units per operation (the meter's ``billed``: per KB, x2 in a transaction, GSI writes
  included) times the rate, minus the index's own writes, which count against the index.
* **An item keyed by the operation** (``OPERATION#<id>``, ``ORDER#<id>``...): random ids spread the
  items over every partition, and DynamoDB adds partitions as the table's load grows, so no partition
  is hot. What one partition can be made to carry is ONE item's writes: each operation has its own
  item, so that load does not grow with the rate. The model takes the worst case, every unit an
  operation writes to its item within one second, and compares it with 1,000 WU/s and 3,000 RU/s.
* **A key shared by operations** (a SKU's stock, a customer's balance): rate x units per operation x
  the share of operations that hit the busiest key (``--hot-share``, default 1: every operation on one
  key, which is what ``make cost`` drove).
* **A fixed-shard index** (the deadline index ``due``, ``relay.deadlines``): each shard value is one
  index partition, so a shard takes rate x index writes per operation / shard count. ``dueAt`` is a
  time, so a shard's writes land at the newest end of its key range; the model does not count on
  DynamoDB splitting a shard's range and keeps the issue's 1,000 WU/s per shard.
* **Lambda**: Little's law, concurrency = rate x invocations per operation x the stated duration
  (``duration_ms_assumed`` in the cost JSON, or ``--duration-ms``, ``--function-duration``). Summed
  against the account's concurrency; each SQS consumer's against Relay's maximum concurrency per event
  source (stage config ``consumers.max_concurrency``).
* **SQS**: standard queues have no documented request ceiling; a queue's in-flight messages are at
  most rate x invocations x batch size x (batching window + duration).
* **SNS**: messages published per second, account-wide (a PublishBatch counts its messages).
* **HTTP APIs**: one API-function invocation per request; summed against the account throttle, and
  per API against its stage throttle (stage config ``http_api.throttle_rate``).
* **EventBridge**: PutEvents requests and rule invocations per second, account-wide.
* **Secrets Manager**: GetSecretValue per operation as measured (the functions cache the secret per
  container, so the true rate is lower: an upper bound).
* **DynamoDB Streams**: readers per shard (one Lambda mapping per stream) against the two AWS allows;
  it does not grow with the rate.
* **S3**: PUTs per second per key prefix.

What the cost JSON does not say -- which table and key a DynamoDB call wrote, how many of its write
units went to an index, how many messages a PublishBatch carried, which prefix an S3 PUT wrote -- comes
from ``ROUTES``, ``S3_ROUTES`` and ``MESSAGES_PER_OPERATION`` below, read off the code. A caller the
tables do not know is counted against an ``unmapped`` table and named in the notes.
"""

from __future__ import annotations

import argparse
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


# -- what the cost JSON does not say: read off the code -------------------------------------------------


@dataclass(frozen=True)
class Part:
    """The share of one metered DynamoDB request that lands on one key pattern of one table.

    ``units``: units per request on that key; None: whatever the request's other parts leave (at most
    one such part per route). ``shared``: the key is shared by many operations (a hot key), not one per
    operation. ``index_writes``: entries of the table's deadline index (``due``) the request writes or
    removes; each is a KEYS_ONLY entry under 1 KB, so one write unit."""

    table: str
    key: str
    units: float | None = None
    shared: bool = False
    index_writes: float = 0.0


def _on(table: str, key: str, **kwargs: Any) -> tuple[Part, ...]:
    return (Part(table, key, **kwargs),)


OPERATION = "OPERATION#<operationId>"
ORDER = "ORDER#<orderId>"

# (function, action) -> where its units land. Function: "<service>-<construct id>", as in the caller's
# name without the stage prefix and the "Function<hash>" suffix.
ROUTES: dict[tuple[str, str], tuple[Part, ...]] = {
    # payments (functions/payments/store.py): everything is the operation item, keyed by its id. It
    # enters the deadline index when accepted (the PutItem) and leaves it when the publisher settles it
    # (relay.outbox.settle_item: the one UpdateItem per operation); the steps between cost the KEYS_ONLY
    # index nothing.
    ("payments-Api", "PutItem"): _on("payments-operations", OPERATION, index_writes=1),
    ("payments-Api", "GetItem"): _on("payments-operations", OPERATION),
    ("payments-PaymentWorker", "GetItem"): _on("payments-operations", OPERATION),
    ("payments-PaymentWorker", "UpdateItem"): _on("payments-operations", OPERATION),
    ("payments-PostProcessor", "GetItem"): _on("payments-operations", OPERATION),
    ("payments-PostProcessor", "UpdateItem"): _on("payments-operations", OPERATION),
    ("payments-InvoiceWorker", "GetItem"): _on("payments-operations", OPERATION),
    ("payments-InvoiceWorker", "UpdateItem"): _on("payments-operations", OPERATION),
    ("payments-OutboxPublisher", "UpdateItem"): _on("payments-operations", OPERATION, index_writes=1),
    ("payments-NoticeSender", "GetItem"): _on("payments-operations", OPERATION),
    # Powertools idempotency records of a notice (only for operations with a callbackUrl).
    ("payments-NoticeSender", "PutItem"): _on("payments-idempotency", "<notice idempotency key>"),
    ("payments-NoticeSender", "UpdateItem"): _on("payments-idempotency", "<notice idempotency key>"),
    # orders (functions/orders/store.py, fulfilment.py): the order item, its reservation, and one stock
    # item per SKU line, taken in the reservation's transaction (2 units: a transactional write of a
    # small item). The stock item is shared by every order of that SKU.
    ("orders-Api", "GetItem"): _on("orders-orders", ORDER),
    ("orders-Api", "TransactWriteItems"): _on("orders-orders", ORDER),
    ("orders-InventoryWorker", "GetItem"): _on("orders-orders", ORDER),
    ("orders-InventoryWorker", "TransactWriteItems"): (
        Part("orders-inventory", "SKU#<sku> (stock)", units=2, shared=True),
        Part("orders-inventory", "ORDER#<orderId> (reservation)", units=2),
        Part("orders-orders", ORDER),
    ),
    ("orders-PaidOrders", "GetItem"): _on("orders-orders", ORDER),
    ("orders-PaidOrders", "TransactWriteItems"): _on("orders-orders", ORDER),
    ("orders-ShippingWorker", "GetItem"): _on("orders-orders", ORDER),
    ("orders-ShippingWorker", "TransactWriteItems"): _on("orders-orders", ORDER),
    ("orders-OutboxPublisher", "UpdateItem"): _on("orders-orders", ORDER),
    ("orders-Notifier", "PutItem"): _on("orders-idempotency", "<notification idempotency key>"),
    ("orders-Notifier", "UpdateItem"): _on("orders-idempotency", "<notification idempotency key>"),
    # loyalty (functions/loyalty/store.py): the balance and every order's accrual share the customer's
    # partition (pk CUSTOMER#<customerId>), so all of it is one customer's key.
    ("loyalty-PointsWorker", "GetItem"): _on("loyalty-points", "CUSTOMER#<customerId>", shared=True),
    ("loyalty-PointsWorker", "TransactWriteItems"): _on(
        "loyalty-points", "CUSTOMER#<customerId>", shared=True
    ),
    # reports (functions/reports/store.py): one verification per report; the notifier's Powertools
    # records in the idempotency table.
    ("reports-Verifier", "GetItem"): _on("reports-verifications", "REPORT#<reportId>"),
    ("reports-Verifier", "TransactWriteItems"): _on("reports-verifications", "REPORT#<reportId>"),
    ("reports-Notifier", "PutItem"): _on("reports-idempotency", "<notification idempotency key>"),
    ("reports-Notifier", "UpdateItem"): _on("reports-idempotency", "<notification idempotency key>"),
    # scores (functions/scores/snapshots.py): one snapshot per agent and hour; the job reads the
    # hour's verifications with a Scan.
    ("scores-SnapshotWorker", "Scan"): _on("reports-verifications", "(scan of the hour's verifications)"),
    ("scores-SnapshotWorker", "GetItem"): _on("scores-scores", "AGENT#<agentId> (snapshot)"),
    ("scores-SnapshotWorker", "PutItem"): _on("scores-scores", "AGENT#<agentId> (snapshot)"),
    ("scores-SnapshotWorker", "TransactWriteItems"): _on("scores-scores", "AGENT#<agentId> (snapshot)"),
}

# Stream consumers: the table whose stream each reads (one reader per shard each).
STREAM_TABLES: dict[str, str] = {
    "payments-OutboxPublisher": "payments-operations",
    "orders-OutboxPublisher": "orders-orders",
}

# Messages each outbox publisher publishes to SNS per operation of a flow on the happy path (the meter
# counts PublishBatch requests, not their messages). payments: PaymentRequested, PaymentCompleted,
# InvoiceRequested, OperationCompleted (functions/payments/subscriptions.py); orders: OrderCreated and
# OrderPaid on order-events (functions/orders/subscriptions.py; OrderPaid also goes to the bus).
MESSAGES_PER_OPERATION: dict[str, float] = {
    "payments-OutboxPublisher": 4.0,
    "orders-OutboxPublisher": 2.0,
}


@dataclass(frozen=True)
class S3Route:
    bucket: str
    prefix: str
    # How many different prefixes one operation's PUTs spread over (at one moment).
    prefixes_per_operation: float


S3_ROUTES: dict[tuple[str, str], S3Route] = {
    # functions/orders/archive.py: events/dt=<day>/<eventType>/<eventId>.json -- one prefix per event
    # type per day, and an order's two events (OrderCreated, OrderPaid) are two types.
    ("orders-AnalyticsWriter", "PutObject"): S3Route("orders-analytics", "events/dt=<day>/<eventType>/", 2.0),
}


_FUNCTION = re.compile(r"(?P<service>[a-z]+)-(?P<name>[A-Za-z0-9]+?)Function[0-9A-F]{8}\b")


def function_of(name: str) -> str:
    """'relay-dev-payments-ApiFunction6BF808ED' (or 'payments-ApiFunction6BF808ED', or the glue's
    'glue:esm (relay-dev-...)') -> 'payments-Api'; anything else is returned as it is."""
    found = _FUNCTION.search(name)
    return f"{found['service']}-{found['name']}" if found else name


def _inside(caller: str) -> str:
    """'glue:sns (relay-dev-payments-payment-events)' -> 'payments-payment-events'."""
    inner = caller[caller.find("(") + 1 : caller.rfind(")")] if "(" in caller else caller
    parts = inner.split("-", 2)
    return parts[2] if inner.startswith("relay-") and len(parts) == 3 else inner


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
) -> Capacity:
    """The load on every resource a flow touches at ``rate`` operations per second, beside its limit."""
    cap = Capacity(flow=flow, rate=rate, duration_ms=duration_ms, settings=settings)
    requests = list(flow_data.get("by_caller_per_operation", []))
    durations = _durations(duration_ms, function_durations_ms or {})
    _dynamodb(cap, requests, quotas)
    invocations = {
        function_of(k): float(v) for k, v in flow_data.get("invocations_per_operation", {}).items()
    }
    consumers = _lambda(cap, invocations, requests, durations, quotas)
    _sqs(cap, requests, {fn: invocations[fn] for fn in consumers if fn in invocations}, durations, quotas)
    _sns(cap, requests, quotas)
    _http(cap, flow_data, quotas)
    _events(cap, flow_data, requests, quotas, prices or {})
    _secrets_s3_streams(cap, requests, quotas)
    cap.notes.append(
        "KMS: the SNS topics use SSE with the AWS managed key aws/sns, so SNS calls KMS for the account "
        f"(quota {quotas['kms.cryptographic.symmetric'].value:,.0f}/s shared, symmetric, us-east-1); the "
        "sandbox does not see those calls, so their rate is not modelled."
    )
    return cap


def _dynamodb(cap: Capacity, requests: Iterable[Mapping[str, Any]], quotas: Mapping[str, Quota]) -> None:
    table_w: dict[str, float] = defaultdict(float)
    table_r: dict[str, float] = defaultdict(float)
    index_w: dict[str, float] = defaultdict(float)
    item_w: dict[tuple[str, str], float] = defaultdict(float)
    item_r: dict[tuple[str, str], float] = defaultdict(float)
    shared_w: dict[tuple[str, str], float] = defaultdict(float)
    shared_r: dict[tuple[str, str], float] = defaultdict(float)
    for row in requests:
        if row["service"] != "dynamodb":
            continue
        fn, action = function_of(row["caller"]), row["action"]
        count, billed = float(row["requests"]), float(row["billed"])
        reads = action in ("GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems")
        route = ROUTES.get((fn, action))
        if route is None:
            table = f"unmapped ({fn})"
            cap.unmapped.append(f"dynamodb {action} by {fn}: {billed:g} units per operation")
            route = (Part(table, "?"),)
        explicit = sum((p.units or 0.0) * count for p in route)
        indexed = sum(p.index_writes * count for p in route)
        rest = max(billed - explicit - indexed, 0.0)
        for part in route:
            units = (part.units * count) if part.units is not None else rest
            index_units = part.index_writes * count
            if reads:
                table_r[part.table] += units
                (shared_r if part.shared else item_r)[(part.table, part.key)] += units
            else:
                table_w[part.table] += units
                index_w[part.table] += index_units
                (shared_w if part.shared else item_w)[(part.table, part.key)] += units
    for table in sorted(set(table_w) | set(table_r)):
        for metric, units, key in (
            ("write units/s (table)", table_w[table], "dynamodb.table.write"),
            ("read units/s (table)", table_r[table], "dynamodb.table.read"),
        ):
            if units:
                cap.rows.append(Row("DynamoDB", table, metric, units, _aws(quotas, key)))
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
        cap.rows.append(
            Row(
                "DynamoDB",
                f"{table} index due",
                "write units/s (GSI)",
                units,
                _aws(quotas, "dynamodb.table.write"),
            )
        )
        cap.rows.append(
            Row(
                "DynamoDB",
                f"{table} index due, one shard of {shards}",
                "write units/s (partition)",
                shard_load(1.0, units, shards),
                _aws(quotas, "dynamodb.partition.write"),
                note=f"{units:g} index writes per operation / {shards} shards (relay.deadlines)",
                shard=True,
            )
        )
    for (table, key), units in sorted(item_w.items()):
        cap.rows.append(
            Row(
                "DynamoDB",
                f"{table} {key}",
                "write units/s (one item, worst second)",
                units,
                _aws(quotas, "dynamodb.partition.write"),
                scales=False,
                note="one item per operation: its units, all in one second at worst, whatever the rate",
            )
        )
    for (table, key), units in sorted(item_r.items()):
        cap.rows.append(
            Row(
                "DynamoDB",
                f"{table} {key}",
                "read units/s (one item, worst second)",
                units,
                _aws(quotas, "dynamodb.partition.read"),
                scales=False,
            )
        )
    share = cap.settings.hot_key_share
    for (table, key), units in sorted(shared_w.items()):
        cap.rows.append(
            Row(
                "DynamoDB",
                f"{table} {key}",
                "write units/s (shared key)",
                units * share,
                _aws(quotas, "dynamodb.partition.write"),
                note=f"a key shared by operations; {share:.0%} of them on the busiest (--hot-share)",
            )
        )
    for (table, key), units in sorted(shared_r.items()):
        cap.rows.append(
            Row(
                "DynamoDB",
                f"{table} {key}",
                "read units/s (shared key)",
                units * share,
                _aws(quotas, "dynamodb.partition.read"),
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
            fn = function_of(r["caller"])
            if "entries" in r:  # the meter's message count, when cost.json carries it
                messages += float(r["entries"])
            elif r["action"] == "Publish":
                messages += float(r["requests"])
            elif fn in MESSAGES_PER_OPERATION:
                messages += MESSAGES_PER_OPERATION[fn]
            else:
                per_batch = quotas["sns.publish_batch.entries"].value or 10.0
                messages += float(r["requests"]) * per_batch
                bounds.append(fn)
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
        note = "messages per operation read off the code (MESSAGES_PER_OPERATION)"
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
    cap: Capacity, requests: Sequence[Mapping[str, Any]], quotas: Mapping[str, Quota]
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
        fn = function_of(r["caller"])
        route = S3_ROUTES.get((fn, r["action"]))
        put = r["action"] in ("PutObject", "CopyObject", "DeleteObject", "POST")
        key = "s3.prefix.put" if put else "s3.prefix.get"
        if route is None:
            cap.unmapped.append(f"s3 {r['action']} by {fn}: counted as one prefix")
            route = S3Route("?", "?", 1.0)
        cap.rows.append(
            Row(
                "S3",
                f"{route.bucket} {route.prefix}",
                f"{'PUT' if put else 'GET'} requests/s (one prefix)",
                float(r["requests"]) / route.prefixes_per_operation,
                _aws(quotas, key),
                note=f"{r['requests']:g} per operation over {route.prefixes_per_operation:g} prefixes",
            )
        )
    readers: dict[str, int] = defaultdict(int)
    # A stream the flow writes: its mapping got records (an idle stream's GetRecords all come back empty).
    busy = {
        function_of(r["caller"])
        for r in requests
        if r["service"] == "dynamodbstreams" and float(r["requests"]) > float(r["empty"])
    }
    for fn in sorted(busy):
        readers[STREAM_TABLES.get(fn, f"unmapped ({fn})")] += 1
    for table, count in sorted(readers.items()):
        cap.rows.append(
            Row(
                "DynamoDB Streams",
                f"{table} stream",
                "readers per shard",
                float(count),
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
