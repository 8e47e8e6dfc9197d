"""``python -m ops migrate``: rewrite every item of an older layout into today's (``schemaVersion`` 2).

The upgrade order (docs/deployment.md "Upgrading the data layout"): deploy the release that reads both
layouts, run ``ops migrate``, check that ``ops doctor`` counts 0 items of an older layout, then deploy
the release without the readers of the older one.

Each pass scans one table and hands every item of an older layout to the service's own migration
(``payments.migration``, ``orders.migration``: the stores' attribute names stay in ``functions/``):

* payments operations without ``schemaVersion``: written before one write per step (no ``seen``, the
  older deadline index ``deadlineShard``/``deadlineAt``, steps as maps, processed-event markers) are
  rewritten; today's are stamped;
* orders without ``schemaVersion``: ``seen``, history as strings, stamped;
* outbox rows (payments and orders): an unpublished row is published as the stream publisher does
  (SNS, and the bus for the orders' integration events), then every row is deleted;
* reservation items (orders inventory): folded into the order's ``stock``, in one transaction.

Safe beside live traffic: every write is conditional on what was read (a step that wrote in between
wins, and the item is read again, up to ``RETRIES`` times). Idempotent: a migrated item is no longer
selected, so a second run finds nothing. Resumable: each pass's scan position is kept in
``.ops/migrate-<stage>.json`` after every page, and a run resumes there (``--restart`` scans again
from the top). Rate-limited: at most ``--rate`` items written a second. Audited: every run appends
who, when, why and the counts to ``.ops/migrate-audit.jsonl``. ``--dry-run`` counts what it would
rewrite and writes nothing (no audit, no checkpoint).

What a migration cannot rewrite is counted and left to its TTL: client Idempotency-Keys bound by the
layout before (``request-key#…``: today's ids derive from caller and key, an old key named a random
id), and processed-event markers (``event#…``, kept 7 days).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ops.app import App, OpsError, add_connection_arguments, connect

AUDIT_FILE = Path(".ops") / "migrate-audit.jsonl"
CHECKPOINT_DIR = Path(".ops")
RETRIES = 3
PAGE = 100
DEFAULT_RATE = 50.0  # items written a second: a few percent of a table's on-demand throughput
MOVED_ON = "moved on"

Migrate = Callable[["Context", dict[str, Any]], str]


@dataclass
class Context:
    app: App
    dry_run: bool
    rate: float
    environments: dict[str, dict[str, str]] = field(default_factory=dict)
    _last_write: float = 0.0

    @property
    def ddb(self) -> Any:
        return self.app.client("dynamodb")

    def pace(self) -> None:
        """At most ``rate`` writes a second."""
        if self.dry_run or self.rate <= 0:
            return
        wait = self._last_write + 1.0 / self.rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        self._last_write = time.monotonic()

    def environment(self, handler: str) -> dict[str, str]:
        """The environment of the function with ``handler`` (its topic, bus and table names)."""
        if handler not in self.environments:
            found = next((f for f in self.app.functions() if f.handler == handler), None)
            if found is None:
                raise OpsError(f"no function with handler {handler} in {self.app.describe()}")
            self.environments[handler] = dict(found.environment)
        return self.environments[handler]


@dataclass(frozen=True)
class Pass:
    name: str
    service: str
    table: str  # the table's short name (``App.name(service, table)``)
    selects: Callable[[Mapping[str, Any]], bool]
    migrate: Migrate

    def physical(self, app: App) -> str:
        return app.name(self.service, self.table)


# -- the passes -------------------------------------------------------------------------------------

PAYMENTS_PUBLISHER = "payments.handlers.outbox_publisher.handler"
ORDERS_PUBLISHER = "orders.handlers.outbox_publisher.handler"
PAYMENTS_API = "payments.handlers.api.handler"
DEFAULT_SHARDS = 64  # relay.deadlines.DEFAULT_SHARDS: a stage that does not set payments.deadline_shards


def _is_outbox_row(item: Mapping[str, Any]) -> bool:
    return item.get("kind") == "outbox"


def _publish_and_delete(ctx: Context, item: dict[str, Any], *, table: str, handler: str, orders: bool) -> str:
    """An outbox row: published as the stream publisher publishes it when it is not marked published
    (a duplicate downstream if the publisher did get to it: consumers dedupe on the eventId), then
    deleted, only while it is the row that was read."""
    from relay.ddb import apply_write, delete
    from relay.envelope import Envelope
    from relay.outbox import sns_publisher

    if ctx.dry_run:
        return "would publish and delete" if not item.get("publishedAt") else "would delete"
    if not item.get("publishedAt"):
        env = ctx.environment(handler)
        envelope = Envelope.from_json(str(item["envelope"]))
        if orders:
            from orders.subscriptions import BUS_EVENT_TYPES, ORDERS_SOURCE

            from relay.outbox import BusRoute, bus_publisher

            sns_publisher(env["EVENTS_TOPIC_ARN"], ctx.app.client("sns"))(envelope, item)
            route = BusRoute(env["EVENT_BUS_NAME"], ORDERS_SOURCE, frozenset(BUS_EVENT_TYPES))
            bus_publisher(route, ctx.app.client("events"))(envelope, item)
        else:
            from payments.subscriptions import message_attributes

            sns_publisher(env["EVENTS_TOPIC_ARN"], ctx.app.client("sns"), message_attributes)(envelope, item)
    moved = _MovedOn()
    write = delete(
        table,
        {"pk": item["pk"], "sk": item["sk"]},
        "attribute_exists(pk)",
        on_condition_failed=lambda _old: moved,
    )
    try:
        apply_write(write, ddb_client=ctx.ddb)
    except _MovedOn:
        return "gone"
    return "published and deleted" if not item.get("publishedAt") else "deleted"


class _MovedOn(Exception):
    pass


def _payments_operation(ctx: Context, item: dict[str, Any]) -> str:
    from payments import migration

    table = ctx.app.name("payments", "operations")
    if migration.is_older(item):
        shards = ctx.environment(PAYMENTS_API).get("DEADLINE_SHARDS") if not ctx.dry_run else None
        return migration.migrate_operation(
            ctx.ddb,
            operations_table=table,
            idempotency_table=ctx.app.name("payments", "idempotency"),
            item=item,
            deadline_shards=int(shards) if shards else DEFAULT_SHARDS,
            dry_run=ctx.dry_run,
        )
    return migration.stamp(ctx.ddb, operations_table=table, item=item, dry_run=ctx.dry_run)


def _without_version(sort_key: str) -> Callable[[Mapping[str, Any]], bool]:
    from relay.entity_events import SCHEMA_VERSION_ATTRIBUTE

    return lambda item: item.get("sk") == sort_key and SCHEMA_VERSION_ATTRIBUTE not in item


def _order(ctx: Context, item: dict[str, Any]) -> str:
    from orders.migration import migrate_order

    return migrate_order(
        ctx.ddb, orders_table=ctx.app.name("orders", "orders"), item=item, dry_run=ctx.dry_run
    )


def _reservation(ctx: Context, item: dict[str, Any]) -> str:
    from orders.migration import migrate_reservation

    return migrate_reservation(
        ctx.ddb,
        orders_table=ctx.app.name("orders", "orders"),
        inventory_table=ctx.app.name("orders", "inventory"),
        item=item,
        dry_run=ctx.dry_run,
    )


def passes() -> list[Pass]:
    """Every pass, in the order they must run: the rows an item's migration reads (markers, outbox
    rows) are still there when it runs, and outbox rows go out before their operations are stamped."""
    from orders.migration import is_reservation

    return [
        Pass(
            "payments operations without schemaVersion",
            "payments",
            "operations",
            _without_version("OPERATION"),
            _payments_operation,
        ),
        Pass(
            "payments outbox rows",
            "payments",
            "operations",
            _is_outbox_row,
            lambda ctx, item: _publish_and_delete(
                ctx,
                item,
                table=ctx.app.name("payments", "operations"),
                handler=PAYMENTS_PUBLISHER,
                orders=False,
            ),
        ),
        Pass("orders reservation items", "orders", "inventory", is_reservation, _reservation),
        Pass("orders without schemaVersion", "orders", "orders", _without_version("ORDER"), _order),
        Pass(
            "orders outbox rows",
            "orders",
            "orders",
            _is_outbox_row,
            lambda ctx, item: _publish_and_delete(
                ctx, item, table=ctx.app.name("orders", "orders"), handler=ORDERS_PUBLISHER, orders=True
            ),
        ),
    ]


# What is left to expire rather than migrated: (what, service, table, id prefix).
EXPIRING = (
    ("client Idempotency-Keys of the layout before (expire by TTL)", "request-key#"),
    ("processed-event markers (expire by TTL)", "event#"),
)
EXPIRING_TABLES = (("payments", "idempotency"), ("orders", "idempotency"))


# -- the driver -------------------------------------------------------------------------------------


def _scan(
    ctx: Context, table: str, start: dict[str, Any] | None
) -> Iterator[tuple[list[dict[str, Any]], dict[str, Any] | None]]:
    """Pages of plain items, each with the key to resume after it (None: the table is done)."""
    from relay.ddb import deserialize_item

    while True:
        params: dict[str, Any] = {"TableName": table, "Limit": PAGE, "ConsistentRead": True}
        if start:
            params["ExclusiveStartKey"] = start
        page = ctx.ddb.scan(**params)
        start = page.get("LastEvaluatedKey")
        yield [deserialize_item(i) for i in page.get("Items", [])], start
        if not start:
            return


def _table_exists(ctx: Context, table: str) -> bool:
    try:
        ctx.ddb.describe_table(TableName=table)
    except ctx.ddb.exceptions.ResourceNotFoundException:
        return False
    return True


def _again(ctx: Context, table: str, item: Mapping[str, Any]) -> dict[str, Any] | None:
    from relay.ddb import deserialize_item, serialize_item

    found = ctx.ddb.get_item(
        TableName=table, Key=serialize_item({"pk": item["pk"], "sk": item["sk"]}), ConsistentRead=True
    ).get("Item")
    return deserialize_item(found) if found else None


def _migrate_one(ctx: Context, step: Pass, table: str, item: dict[str, Any]) -> str:
    """Migrate one item; when a step wrote it meanwhile, read it again and retry (``RETRIES`` times)."""
    outcome = MOVED_ON
    for _ in range(RETRIES):
        ctx.pace()
        outcome = step.migrate(ctx, item)
        if outcome != MOVED_ON:
            return outcome
        again = _again(ctx, table, item)
        if again is None or not step.selects(again):
            return "done by a step meanwhile"
        item = again
    return outcome


def run_pass(ctx: Context, step: Pass, checkpoint: dict[str, Any]) -> Counter[str]:
    """One pass over its table from its checkpoint; the outcomes counted."""
    table = step.physical(ctx.app)
    counts: Counter[str] = Counter()
    if not _table_exists(ctx, table):
        counts["table not deployed"] += 1
        return counts
    state = checkpoint.setdefault(step.name, {})
    if state.get("done") and not ctx.dry_run:
        counts["done before"] += 1
        return counts
    for items, after in _scan(ctx, table, None if ctx.dry_run else state.get("after")):
        for item in items:
            counts["scanned"] += 1
            if not step.selects(item):
                continue
            counts[_migrate_one(ctx, step, table, item)] += 1
        if not ctx.dry_run:
            state["after"] = after
            state["done"] = after is None
            _save(ctx, checkpoint)
    return counts


def expiring(ctx: Context) -> Counter[str]:
    """Items a migration leaves to their TTL, by what they are (a scan of each idempotency table)."""
    found: Counter[str] = Counter()
    for service, short in EXPIRING_TABLES:
        table = ctx.app.name(service, short)
        if not _table_exists(ctx, table):
            continue
        for items, _ in _scan(ctx, table, None):
            for item in items:
                for what, prefix in EXPIRING:
                    if str(item.get("id", "")).startswith(prefix):
                        found[f"{service}: {what}"] += 1
    return found


def older_items(app: App) -> dict[str, int]:
    """How many items of an older layout each pass would rewrite now (``ops doctor``)."""
    ctx = Context(app, dry_run=True, rate=0)
    return {
        step.name: sum(n for outcome, n in run_pass(ctx, step, {}).items() if outcome.startswith("would"))
        for step in passes()
    }


def _checkpoint_file(ctx: Context) -> Path:
    return CHECKPOINT_DIR / f"migrate-{ctx.app.prefix}.json"


def _load(ctx: Context) -> dict[str, Any]:
    path = _checkpoint_file(ctx)
    return dict(json.loads(path.read_text())) if path.exists() else {}


def _save(ctx: Context, checkpoint: Mapping[str, Any]) -> None:
    path = _checkpoint_file(ctx)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(checkpoint, default=str))


def migrate(app: App, *, dry_run: bool, rate: float, reason: str, restart: bool = False) -> dict[str, Any]:
    """Run every pass; returns the audit record (also appended to ``AUDIT_FILE`` unless ``dry_run``)."""
    if not dry_run and not reason.strip():
        raise OpsError("a migration needs --reason (it goes into the audit record)")
    ctx = Context(app, dry_run=dry_run, rate=rate)
    checkpoint = {} if restart or dry_run else _load(ctx)
    started = datetime.now(UTC)
    results = {step.name: dict(run_pass(ctx, step, checkpoint)) for step in passes()}
    record = {
        "at": started.isoformat().replace("+00:00", "Z"),
        "stage": app.prefix,
        "dryRun": dry_run,
        "reason": reason,
        "passes": results,
        "leftToExpire": dict(expiring(ctx)),
        "seconds": round((datetime.now(UTC) - started).total_seconds(), 1),
    }
    if not dry_run:
        record["by"] = _caller(app)
        AUDIT_FILE.parent.mkdir(parents=True, exist_ok=True)
        with AUDIT_FILE.open("a") as audit:
            audit.write(json.dumps(record) + "\n")
    return record


def _caller(app: App) -> str:
    try:
        return app.caller()
    except Exception:  # the identity is for the audit; a failure to tell it must not stop the run
        return "unknown"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "migrate",
        help="rewrite every item of an older data layout into today's (resumable, rate-limited, audited)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    add_connection_arguments(parser)
    parser.add_argument("--dry-run", action="store_true", help="count what would be rewritten; write nothing")
    parser.add_argument(
        "--rate", type=float, default=DEFAULT_RATE, help=f"items written a second (default {DEFAULT_RATE:g})"
    )
    parser.add_argument("--reason", default="", help="why (for the audit record); required unless --dry-run")
    parser.add_argument("--restart", action="store_true", help="scan every table from the top again")
    parser.add_argument("--json", action="store_true", help="print the record as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    app = connect(args)
    record = migrate(app, dry_run=args.dry_run, rate=args.rate, reason=args.reason, restart=args.restart)
    if args.json:
        print(json.dumps(record))
        return 0
    print(f"migrate{' (dry run: nothing written)' if args.dry_run else ''}: {app.describe()}")
    for name, counts in record["passes"].items():
        shown = ", ".join(f"{outcome} {n}" for outcome, n in sorted(counts.items())) or "nothing"
        print(f"  {name}: {shown}")
    for what, n in sorted(record["leftToExpire"].items()):
        print(f"  left to expire: {what}: {n}")
    if not args.dry_run:
        print(f"audited in {AUDIT_FILE}")
    return 0
