"""``ops operation ID``, ``ops order ID``, ``ops replay ID --reason …`` and ``ops republish-order ID
--reason …``: one entity, without receiving.

* ``operation`` shows a payment operation as stored: state, version, step history, timestamps, error,
  claim-check refs, its deadline and retry fields, its outbox rows (published or not), and its parked
  messages from the parked ledger (``relay.ledger``, GSI ``by-entity``) -- no DLQ is received from.
* ``order`` shows what an order item holds, read through the orders store: status, version, lines,
  history, the stock it holds (``stock``), its payment, ``shipment``, rejection or cancellation and the
  events it has processed (``seen``), with its orphan payments and parked messages.
* ``replay`` re-drives the current step of a non-terminal operation through the outbox, with the
  sweeper's own code (``payments.sweeper.redrive``): the partners' idempotency keys come from the
  operation id, so a replay cannot charge or invoice twice. It refuses a terminal operation (its end
  is a business outcome or needs a human: nothing can move it), and an operation whose step is
  visibly at work (a next attempt scheduled and due, unless ``--force``). Every replay is audited
  (who, when, reason) on stdout and in the audit file.
* ``republish-order`` publishes again what an order's last write put into it, as the orders stream
  publisher does (orders have no sweeper), for events whose stream batch was given up; audited too.

The item shapes are the services' (``functions/payments/store.py``, ``functions/orders/store.py``);
this module imports them, so there is one definition.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ops.app import App

AUDIT_FILE = Path(".ops") / "replay-audit.jsonl"


def _iso(epoch: Any) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(int(epoch), UTC).isoformat().replace("+00:00", "Z")


def _items(app: App, table: str, pk: str) -> list[dict[str, Any]]:
    from relay.ddb import deserialize_item

    ddb = app.client("dynamodb")
    rows: list[dict[str, Any]] = []
    params: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": {"S": pk}},
        "ConsistentRead": True,
    }
    while True:
        page = ddb.query(**params)
        rows.extend(deserialize_item(item) for item in page.get("Items", []))
        if not page.get("LastEvaluatedKey"):
            return rows
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def parked_messages(app: App, id_name: str, entity_id: str) -> list[dict[str, Any]]:
    """The ledger's entries for one entity (``operationId``, ``orderId``, ...), oldest first."""
    from relay.ddb import deserialize_item
    from relay.ledger import ENTITY_INDEX

    page = app.client("dynamodb").query(
        TableName=app.name("core", "parked-ledger"),
        IndexName=ENTITY_INDEX,
        KeyConditionExpression="entity = :e",
        ExpressionAttributeValues={":e": {"S": f"{id_name}#{entity_id}"}},
    )
    return [deserialize_item(item) for item in page.get("Items", [])]


def operation_rows(app: App, operation_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The operation's item and every row under it (its outbox rows), in one consistent Query."""
    rows = _items(app, app.name("payments", "operations"), f"OPERATION#{operation_id}")
    return next((r for r in rows if r.get("sk") == "OPERATION"), None), rows


def describe_operation(app: App, operation_id: str) -> dict[str, Any] | None:
    item, rows = operation_rows(app, operation_id)
    if item is None:
        return None
    outbox = [
        {
            "eventType": r.get("eventType"),
            "eventId": r.get("eventId"),
            "createdAt": r.get("createdAt"),
            "publishedAt": r.get("publishedAt"),
        }
        for r in sorted((r for r in rows if r.get("kind") == "outbox"), key=lambda r: str(r.get("createdAt")))
    ]
    # One write per step: the last step's events live in the item itself (relay.entity_events).
    from relay.entity_events import events_in

    outbox += [
        {
            "eventType": e.event_type,
            "eventId": e.event_id,
            "createdAt": e.occurred_at.isoformat(),
            "inItem": True,
        }
        for e in events_in(item)
    ]
    return {
        "operationId": operation_id,
        "correlationId": item.get("correlationId") or operation_id,
        "paymentId": item.get("paymentId"),
        "orderId": item.get("orderId"),
        "status": item.get("status"),
        "version": item.get("version"),
        "createdAt": item.get("createdAt"),
        "updatedAt": item.get("updatedAt"),
        "stateSince": item.get("stateSince"),
        "steps": decoded_steps(item),
        "error": item.get("error"),
        "reconcileReason": item.get("reconcileReason"),
        "claimChecks": {
            name: item[name] for name in ("requestRef", "resultRef", "invoiceInputRef") if item.get(name)
        },
        "requestSha256": item.get("requestSha256"),
        "lastProcessed": item.get("seen"),
        "paymentRef": item.get("paymentRef"),
        "paymentAcceptedAt": item.get("paymentAcceptedAt"),
        "invoiceId": item.get("invoiceId"),
        "callbackUrl": item.get("callbackUrl"),
        "deadline": {
            "deadlineAt": _iso(item.get("dueAt") or item.get("deadlineAt")),
            "nextAttemptAt": item.get("nextAttemptAt"),
            "attempts": item.get("attempts"),
            "retries": item.get("retries"),
            "redrives": item.get("redrives"),
            "lastError": item.get("lastError"),
        },
        "expiresAt": _iso(item.get("expiresAt")),
        "outbox": outbox,
        "parked": parked_messages(app, "operationId", operation_id),
    }


def decoded_steps(item: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The step history as ``{step, status, at}`` (ISO time): the item keeps each entry as one short
    string (``payments.store``), read back with the store's own reader."""
    from payments.store import operation_from_item

    try:
        return [step.entry() for step in operation_from_item(item).steps]
    except (KeyError, ValueError):  # an item the store cannot read (a migration's leftover): as stored
        return list(item.get("steps") or [])


# -- finding operations and orders -----------------------------------------------------------------

SEARCH_SCAN_LIMIT = 5_000  # items read at most by one search: a search never scans a big table whole


def _summaries(
    app: App, table: str, sort_key: str, id_prefix: str, text: str, limit: int
) -> list[dict[str, Any]]:
    """The entity items of ``table`` (``sk == sort_key``) whose id or correlation id is ``text`` (any,
    when empty), newest first: a Scan with a filter, stopped after ``SEARCH_SCAN_LIMIT`` items read.
    An exact id is one GetItem, no scan."""
    from relay.ddb import deserialize_item

    ddb = app.client("dynamodb")
    wanted = text.strip()
    names = {"#s": "status", "#sk": "sk"}
    projection = "pk, #s, createdAt, updatedAt, correlationId, version"
    if wanted:
        exact = ddb.get_item(
            TableName=table,
            Key={"pk": {"S": f"{id_prefix}{wanted}"}, "sk": {"S": sort_key}},
            ProjectionExpression=projection,
            ExpressionAttributeNames={"#s": "status"},
            ConsistentRead=True,
        ).get("Item")
        if exact:
            return [_summary(deserialize_item(exact), id_prefix)]
    request: dict[str, Any] = {
        "TableName": table,
        "ProjectionExpression": projection,
        "FilterExpression": "#sk = :sk" + (" AND correlationId = :c" if wanted else ""),
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": {":sk": {"S": sort_key}, **({":c": {"S": wanted}} if wanted else {})},
    }
    found: list[dict[str, Any]] = []
    read = 0
    while read < SEARCH_SCAN_LIMIT:
        page = ddb.scan(**request)
        read += int(page.get("ScannedCount", 0))
        found.extend(_summary(deserialize_item(i), id_prefix) for i in page.get("Items", []))
        if not page.get("LastEvaluatedKey"):
            break
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    found.sort(key=lambda r: str(r.get("updatedAt") or ""), reverse=True)
    return found[:limit]


def _summary(item: Mapping[str, Any], id_prefix: str) -> dict[str, Any]:
    entity_id = str(item["pk"]).removeprefix(id_prefix)
    return {
        "id": entity_id,
        "status": item.get("status"),
        "version": item.get("version"),
        "correlationId": item.get("correlationId") or entity_id,
        "createdAt": item.get("createdAt"),
        "updatedAt": item.get("updatedAt"),
    }


def find_operations(app: App, text: str = "", *, limit: int = 100) -> list[dict[str, Any]]:
    """Payment operations by operationId or correlationId (every one, newest first, when ``text`` is
    empty), at most ``limit``."""
    return _summaries(app, app.name("payments", "operations"), "OPERATION", "OPERATION#", text, limit)


def find_orders(app: App, text: str = "", *, limit: int = 100) -> list[dict[str, Any]]:
    """Orders by orderId or correlationId, as ``find_operations``."""
    return _summaries(app, app.name("orders", "orders"), "ORDER", "ORDER#", text, limit)


def _fields(value: Any) -> dict[str, Any]:
    """A domain record as the item names its attributes (``eventId``, not ``event_id``)."""
    return {
        name.split("_")[0] + "".join(part.title() for part in name.split("_")[1:]): v
        for name, v in asdict(value).items()
        if v is not None
    }


def describe_order(app: App, order_id: str) -> dict[str, Any] | None:
    """What the order item holds, read through the orders store (``orders.store.OrderStore``), with
    the orphan payments under it and its parked messages."""
    from orders.store import OrderStore

    table = app.name("orders", "orders")
    store = OrderStore(orders_table=table, idempotency_table=None, ddb_client=app.client("dynamodb"))
    order = store.get_order(order_id)
    if order is None:
        return None
    held = {
        "rejection": order.rejection,
        "cancellation": order.cancellation,
        "shipment": order.shipment,
    }
    return {
        "orderId": order.order_id,
        "correlationId": order.correlation_id,
        "customerId": order.customer_id,
        "status": order.status,
        "version": order.version,
        "createdAt": order.created_at,
        "updatedAt": order.updated_at,
        "items": [asdict(line) for line in order.items],
        "currency": order.currency,
        "history": [h.entry() for h in order.history],
        "stock": order.stock,
        "paymentOperationId": order.payment_operation_id,
        **{name: _fields(value) if value else None for name, value in held.items()},
        "seen": order.seen,
        # A payment that completed for this order after it was closed (the OrphanPayments alarm).
        "orphanPayments": [
            r for r in _items(app, table, f"ORDER#{order_id}") if r.get("kind") == "orphan-payment"
        ],
        "parked": parked_messages(app, "orderId", order_id),
    }


class Refused(Exception):
    """An operator action that could do harm, or cannot do anything: said on stderr, exit 1."""


class ReplayRefused(Refused):
    """A replay that could do harm, or cannot do anything."""


@dataclass(frozen=True)
class ReplayPlan:
    """What a replay would re-drive, checked: the operation as read, the store and the stage's shards."""

    operation: Any  # payments.operations.Operation
    store: Any  # payments.store.OperationStore
    shards: int
    now: datetime

    def to_json(self) -> dict[str, Any]:
        operation = self.operation
        return {
            "operationId": operation.operation_id,
            "status": str(operation.status),
            "version": operation.version,
            "nextAttemptAt": operation.next_attempt_at,
            "attempts": operation.attempts,
            "redrives": operation.redrives,
            "lastError": operation.last_error,
            "would": f"re-drive the current step of {operation.status} through the outbox, with the "
            "sweeper's own code and the same idempotency keys (no second charge or invoice)",
        }


def plan_replay(app: App, operation_id: str, *, force: bool = False) -> ReplayPlan:
    """Everything a replay checks before it writes, without writing: raises ``ReplayRefused`` for an
    unknown or terminal operation, and one whose next attempt is scheduled (unless ``force``). A replay's
    dry run (the console's) is this."""
    from payments.operations import MEANING
    from payments.settings import Settings
    from payments.store import OperationStore

    # The stage's deadline shard count, as its sweeper has it: a re-drive writes the index entry.
    sweeper = next((f for f in app.functions() if "DEADLINE_SHARDS" in f.environment), None)
    shards = int(sweeper.environment["DEADLINE_SHARDS"]) if sweeper else Settings().deadline_shards
    store = OperationStore(
        operations_table=app.name("payments", "operations"),
        idempotency_table=None,
        ddb_client=app.client("dynamodb"),
        deadline_shards=shards,
    )
    operation = store.get_operation(operation_id)
    if operation is None:
        raise ReplayRefused(f"no operation {operation_id} in {store.table_name}")
    if operation.status.terminal:
        raise ReplayRefused(
            f"operation {operation_id} is {operation.status} ({MEANING[operation.status]}): terminal, "
            "nothing can move it; a replay would either do nothing or repeat a business outcome. "
            "Ask the client for a new request instead."
        )
    now = datetime.now(UTC)
    due = operation.next_attempt_at
    if due and not force and datetime.fromisoformat(due.replace("Z", "+00:00")) > now:
        raise ReplayRefused(
            f"operation {operation_id} has its next attempt scheduled at {due}: it is not stranded. "
            "Wait for it, or pass --force (harmless: the step is idempotent, but it adds a delivery)."
        )
    return ReplayPlan(operation, store, shards, now)


def replay(
    app: App, operation_id: str, *, reason: str, force: bool = False, audit_file: Path | None = None
) -> dict[str, Any]:
    """Re-drive the operation's current step (``payments.sweeper.redrive``); returns the audit record,
    appended to ``audit_file`` (default ``AUDIT_FILE``)."""
    from payments.settings import Settings
    from payments.sweeper import redrive

    from relay.envelope import new_envelope

    if not reason.strip():
        raise ReplayRefused("a replay needs --reason (the root cause you fixed)")
    plan = plan_replay(app, operation_id, force=force)
    operation, store, now = plan.operation, plan.store, plan.now
    who = _caller(app)
    cause = new_envelope(
        "OperatorReplay",
        identity=[operation_id, "replay", now.isoformat()],
        ids=operation.ids(),
        payload={"reason": reason, "by": who},
        correlation_id=operation.correlation_id,
    )
    deps = _Deps(Settings(operations_table=store.table_name, deadline_shards=plan.shards), store, now)
    moved = redrive(deps, cause, operation, now)
    record = {
        "at": now.isoformat().replace("+00:00", "Z"),
        "by": who,
        "operationId": operation_id,
        "status": str(operation.status),
        "reason": reason,
        "replayed": moved,
        "note": None if moved else "the operation moved on while the replay was prepared; nothing written",
    }
    _append(audit_file or AUDIT_FILE, record)
    return record


class RepublishRefused(Refused):
    """A re-publish that cannot do anything."""


REPUBLISH_AUDIT_FILE = Path(".ops") / "republish-audit.jsonl"
ORDERS_PUBLISHER = "orders.handlers.outbox_publisher.handler"


def republish_order(
    app: App, order_id: str, *, reason: str, publisher_env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Publish again what the order's last write put into it (``ev``), exactly as the orders stream
    publisher does (SNS ``order-events``, and the bus for its integration events); returns the audit
    record.

    Orders have no sweeper: when the stream's retries for a batch are spent (its records go to the
    stream's failure destination), the events are still in the items, and this puts them out. Every
    consumer dedupes on the eventId, so publishing an event that did go out changes nothing.
    ``publisher_env``: the stream publisher's environment (default: read from its function)."""
    from orders.subscriptions import BUS_EVENT_TYPES, ORDERS_SOURCE

    from relay import entity_events
    from relay.outbox import BusRoute, bus_publisher, sns_publisher

    if not reason.strip():
        raise RepublishRefused("a re-publish needs --reason (why the events did not go out)")
    env = publisher_env if publisher_env is not None else _function_env(app, ORDERS_PUBLISHER)
    table = app.name("orders", "orders")
    rows = _items(app, table, f"ORDER#{order_id}")
    item = next((r for r in rows if r.get("sk") == "ORDER"), None)
    if item is None:
        raise RepublishRefused(f"no order {order_id} in {table}")
    events = entity_events.events_in(item)
    sns = sns_publisher(env["EVENTS_TOPIC_ARN"], app.client("sns"))
    bus = bus_publisher(
        BusRoute(env["EVENT_BUS_NAME"], ORDERS_SOURCE, frozenset(BUS_EVENT_TYPES)), app.client("events")
    )
    for event in events:
        sns(event, item)
        bus(event, item)
    now = datetime.now(UTC)
    record = {
        "at": now.isoformat().replace("+00:00", "Z"),
        "by": _caller(app),
        "orderId": order_id,
        "status": item.get("status"),
        "reason": reason,
        "republished": [{"eventType": e.event_type, "eventId": e.event_id} for e in events],
    }
    _append(REPUBLISH_AUDIT_FILE, record)
    return record


def _function_env(app: App, handler: str) -> dict[str, str]:
    found = next((f for f in app.functions() if f.handler == handler), None)
    if found is None:
        raise RepublishRefused(f"no function with handler {handler} in {app.describe()}")
    return dict(found.environment)


class _Deps:
    """What ``redrive`` needs, with the clock stopped at the moment the operator's action was read."""

    def __init__(self, settings: Any, store: Any, now: datetime) -> None:
        self.settings = settings
        self.store = store
        self.clock = lambda: now


def _append(audit_file: Path, record: Mapping[str, Any]) -> None:
    """One JSON line per operator action, appended."""
    audit_file.parent.mkdir(parents=True, exist_ok=True)
    with audit_file.open("a") as audit:
        audit.write(json.dumps(record) + "\n")


def _caller(app: App) -> str:
    try:
        return app.caller()
    except Exception:  # the identity is for the audit; a failure to tell must not block the replay
        return "unknown"


# CLI -------------------------------------------------------------------------------------------


def _print(view: dict[str, Any] | None, what: str, ident: str, as_json: bool) -> int:
    if view is None:
        print(f"no {what} {ident}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(view, indent=2, default=str))
        return 0
    for key, value in view.items():
        if isinstance(value, list | dict):
            if not value:
                print(f"{key}: -")
                continue
            print(f"{key}:")
            rows = value if isinstance(value, list) else [value]
            for row in rows:
                print(f"  {json.dumps(row, default=str)}")
        elif value is not None:
            print(f"{key}: {value}")
    return 0


def _run(action: Callable[[], dict[str, Any]], done: str) -> int:
    """An audited action from the command line: its record on stdout, exit 0 when ``record[done]``;
    a refusal on stderr, exit 1."""
    try:
        record = action()
    except Refused as refused:
        print(f"refused: {refused}", file=sys.stderr)
        return 1
    print(json.dumps(record, indent=2))
    return 0 if record[done] else 1


def register(subparsers: Any, add_connection_arguments: Any, connect: Any) -> None:
    entities = (
        (
            "operation",
            "a payment operation: state, steps, deadline, outbox rows, parked messages (no receive)",
            "the operationId",
            describe_operation,
        ),
        (
            "order",
            "an order: state, history, reservation, outbox rows, parked messages",
            "the orderId",
            describe_order,
        ),
    )
    for command, summary, id_help, describe in entities:
        parser = subparsers.add_parser(command, help=summary)
        parser.add_argument("id", help=id_help)
        parser.add_argument("--json", action="store_true", help="machine-readable output")
        add_connection_arguments(parser)

        def run(args: argparse.Namespace, describe: Any = describe, what: str = command) -> int:
            return _print(describe(connect(args), args.id), what, args.id, args.json)

        parser.set_defaults(run=run)

    for command, summary, find in (
        ("operations", "payment operations by id or correlation id (all, newest first)", find_operations),
        ("orders", "orders by id or correlation id (all, newest first)", find_orders),
    ):
        parser = subparsers.add_parser(command, help=summary)
        parser.add_argument("text", nargs="?", default="", help="an id or a correlation id (default: all)")
        parser.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
        parser.add_argument("--json", action="store_true", help="machine-readable output")
        add_connection_arguments(parser)

        def run_find(args: argparse.Namespace, find: Any = find) -> int:
            rows = find(connect(args), args.text, limit=max(1, args.limit))
            if args.json:
                print(json.dumps(rows, indent=2, default=str))
            for row in [] if args.json else rows:
                print(
                    f"{row['id']}  {row['status']:<20} {row['updatedAt']}  correlation {row['correlationId']}"
                )
            return 0 if rows else 1

        parser.set_defaults(run=run_find)

    rp = subparsers.add_parser(
        "replay",
        help="re-drive the current step of a stranded operation (same idempotency keys; audited)",
        description="Re-drives the current step of a non-terminal operation through the outbox, as the "
        "sweeper does. Refuses a terminal operation, and one whose next attempt is still scheduled "
        "(unless --force).",
    )
    rp.add_argument("id", help="the operationId")
    rp.add_argument("--reason", required=True, help="the root cause you fixed (kept in the audit record)")
    rp.add_argument("--force", action="store_true", help="replay even though a next attempt is scheduled")
    add_connection_arguments(rp)

    def run_replay(args: argparse.Namespace) -> int:
        return _run(lambda: replay(connect(args), args.id, reason=args.reason, force=args.force), "replayed")

    rp.set_defaults(run=run_replay)

    rpo = subparsers.add_parser(
        "republish-order",
        help="publish again an order's last events, from the order itself (consumers dedupe; audited)",
        description="Publishes the events the order's last write put into it, as the orders stream "
        "publisher does: for events whose stream batch went to the stream's failure destination. Orders "
        "have no sweeper to do it.",
    )
    rpo.add_argument("id", help="the orderId")
    rpo.add_argument(
        "--reason", required=True, help="why the events did not go out (kept in the audit record)"
    )
    add_connection_arguments(rpo)

    def run_republish(args: argparse.Namespace) -> int:
        return _run(lambda: republish_order(connect(args), args.id, reason=args.reason), "republished")

    rpo.set_defaults(run=run_republish)
