"""The demo's orders section: the fan-out, stock, notifications and paid orders over real HTTP.

``start()`` (before the payments burst): seed stock from ``ops/stock.json`` with the documented
``ops.seed_stock``; place orders over ``POST /orders`` (one of them asks for more of the limited
print than exists); wait for inventory to reserve them; cancel one; pay the others through
``POST /payments`` with their ``orderId``. ``finish()`` (after it): wait for PaymentCompleted ->
paid-orders to move them to PAID, then print orders by state, stock movements per order and stock per
SKU, and check: every order in the state it should be, stock conserved (seeded = available +
reserved, reserved = what live orders hold), the customer notified once per event, analytics
holding each event once, nothing parked in the orders DLQs.

Then the bus section: OrderPaid (and a paid order's OrderRejected) went to the app's EventBridge bus,
whose rules feed the shipping and points workers, every batch delivered to them TWICE: each paid order
shipped once (the shipping fake's ledger, and the shipment on the order) and credited once
(``GET /customers/{id}/points``), and none for the cancelled and the rejected order.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections import Counter
from typing import TYPE_CHECKING, Any

from emulator.server import client
from local import lifecycle
from local.sandbox import PROJECT_ROOT, Sandbox, stream_records
from ops.seed_stock import DEFAULT_FILE, load_levels, seed_stock

if TYPE_CHECKING:
    from orders.archive import ArchiveRead

NOTIFIED = ("OrderCreated", "OrderPaid", "OrderRejected")
# The bus rules' consumers, delivered every batch twice during the demo (DuplicateDelivery).
BUS_CONSUMERS = ("ShippingWorker", "PointsWorker")
LIMITED = "SKU-LIMITED-PRINT"
BASKETS: list[list[tuple[str, int]]] = [
    [("SKU-RED-MUG", 2), ("SKU-TEAPOT", 1)],
    [("SKU-BLUE-MUG", 1)],
    [("SKU-KETTLE", 1), ("SKU-TEA-SAMPLER", 2)],
    [("SKU-RED-MUG", 1), ("SKU-BLUE-MUG", 1), ("SKU-TEA-SAMPLER", 1)],
    [("SKU-TEAPOT", 2)],
    [(LIMITED, 1)],  # the last unit
]


class OrdersScenario:
    def __init__(self, sandbox: Sandbox, *, orders: int = 12, out: Any = None) -> None:
        self.sb = sandbox
        self.out = out or sys.stdout  # read at call time: the demo's transcript replaces sys.stdout
        self.read = OrdersReader(sandbox)
        self.enabled = self.read.enabled
        self.count = orders
        self.levels: dict[str, int] = {}
        self.baskets: dict[str, list[tuple[str, int]]] = {}  # orderId -> lines
        self.expected: dict[str, str] = {}  # orderId -> final status
        self.operations: dict[str, str] = {}  # orderId -> payment operationId
        self.http_errors: Counter[str] = Counter()
        self.started = 0.0

    # -- HTTP ------------------------------------------------------------------------------------

    def _post(self, path: str, body: dict[str, Any] | None, expect: int) -> dict[str, Any] | None:
        headers = {"Idempotency-Key": uuid.uuid4().hex}
        response = self.sb.call("POST", path, json=body, headers=headers)
        if response.status_code != expect:
            self.http_errors[f"POST {path.split('/')[1]} {response.status_code}"] += 1
            return None
        result: dict[str, Any] = response.json()
        return result

    def _order(self, order_id: str) -> dict[str, Any]:
        response = self.sb.call("GET", f"/orders/{order_id}")
        result: dict[str, Any] = response.json() if response.status_code == 200 else {}
        return result

    def _wait(self, order_ids: list[str], done: Any) -> dict[str, dict[str, Any]]:
        """The orders' views once ``done`` holds for each, or once they stopped changing."""
        views: dict[str, dict[str, Any]] = {}
        waiting = lifecycle.Patience()
        while waiting.more(views):
            views = {o: self._order(o) for o in order_ids}
            if all(done(v) for v in views.values()):
                break
            time.sleep(0.5)
        return views

    # -- the scenario ----------------------------------------------------------------------------

    def start(self) -> None:
        if not self.enabled:
            return
        self.started = time.monotonic()
        if self.sb.mappings is not None:
            duplicates = self.sb.mappings.duplicates
            duplicates.set(tuple(duplicates.patterns | set(BUS_CONSUMERS)))
        self.levels = load_levels(DEFAULT_FILE)
        seed_stock(self.levels, table=self.read.inventory_table, ddb_client=self.read.ddb)
        print(
            f"orders: stock seeded for {len(self.levels)} SKUs from {DEFAULT_FILE.relative_to(PROJECT_ROOT)} "
            "(python -m ops.seed_stock)",
            file=self.out,
        )
        baskets = [BASKETS[i % len(BASKETS)] for i in range(self.count - 1)]
        baskets.append([("SKU-RED-MUG", 1), (LIMITED, 2)])  # more prints than exist: rejected whole
        for i, lines in enumerate(baskets):
            body = {
                "customerId": f"customer-{i:02d}",
                "items": [{"sku": sku, "quantity": n} for sku, n in lines],
                "currency": "EUR",
            }
            created = self._post("/orders", body, 201)
            if created:
                self.baskets[created["orderId"]] = lines
        order_ids = list(self.baskets)
        if not order_ids:
            return
        rejected = order_ids[-1]
        views = self._wait(order_ids, lambda v: v.get("status") in ("RESERVED", "REJECTED"))
        cancelled = order_ids[1]
        self._post(f"/orders/{cancelled}/cancel", None, 200)
        for order_id in order_ids:
            if order_id == rejected:
                self.expected[order_id] = "REJECTED"
            elif order_id == cancelled:
                self.expected[order_id] = "CANCELLED"
            else:
                self.expected[order_id] = "PAID"
                if views[order_id].get("status") != "RESERVED":
                    continue  # not reserved in time: not paid, and the check below says so
                payment = self._post("/payments", self._payment(order_id), 202)
                if payment:
                    self.operations[order_id] = payment["operationId"]
        print(
            f"orders: {len(order_ids)} placed, 1 cancelled, {len(self.operations)} sent to payments "
            f"with their orderId, 1 asking for {LIMITED} ×2 (1 in stock)",
            file=self.out,
            flush=True,
        )

    def _payment(self, order_id: str) -> dict[str, Any]:
        units = sum(n for _, n in self.baskets[order_id])
        return {
            "paymentId": f"pay-{order_id[:8]}",
            "orderId": order_id,
            "amount": f"{12.5 * units:.2f}",
            "currency": "EUR",
            "payer": f"customer-of-{order_id[:8]}",
            "payee": "relay-shop",
            "details": {"note": "sandbox demo order"},
        }

    def finish(self) -> bool:
        if not self.enabled:
            return True
        print(
            "\norders: SNS fan-out to inventory and notifications, every event to analytics (Firehose); "
            "paid through payments",
            file=self.out,
        )
        order_ids = list(self.baskets)
        views = self._wait(order_ids, lambda v: v.get("status") in ("PAID", "CANCELLED", "REJECTED"))
        self.read.wait_idle()
        events = self.read.events(order_ids)
        notified = self.sb.webhook.deliveries_by_key()
        archive = self.read.archive()
        archived = archive.copies if archive else Counter()
        states = Counter(v.get("status", "?") for v in views.values())
        stock = {sku: self.read.stock(sku) for sku in sorted(self.levels)}
        holding: Counter[str] = Counter()
        for order_id, lines in self.baskets.items():
            if views[order_id].get("status") in ("RESERVED", "PAID"):
                for sku, n in lines:
                    holding[sku] += n

        rows = [("orders placed (201)", str(len(order_ids)))]
        rows += [(f"  {state}", str(n)) for state, n in sorted(states.items())]
        rows.append(("stock movements per order", ""))
        for order_id in order_ids:
            rows.append(
                (f"  {order_id[:8]} {views[order_id].get('status', '?')}", self._movement(order_id, views))
            )
        rows.append(("stock per SKU (seeded → available + reserved)", ""))
        for sku, (available, reserved) in stock.items():
            rows.append((f"  {sku}", f"{self.levels[sku]} → {available} + {reserved}"))
        per_event = Counter(notified.get(e, 0) for e, t in events.items() if t in NOTIFIED)
        rows.append(
            ("customer notifications per event", ", ".join(f"{n}× {c}" for n, c in sorted(per_event.items())))
        )
        rows.append(
            (
                "analytics copies per event (Firehose)",
                ", ".join(f"{n}× {c}" for n, c in sorted(Counter(archived[e] for e in events).items())),
            )
        )
        parked = self.read.queued(dlqs=True)
        rows.append(("orders messages parked", str(parked)))
        rows.append(("orders section took", f"{time.monotonic() - self.started:.1f} s"))
        if self.http_errors:
            rows.append(("HTTP errors", ", ".join(f"{k}: {v}" for k, v in self.http_errors.items())))
        width = max(len(r[0]) for r in rows)
        for label, value in rows:
            print(f"  {label:<{width}}  {value}", file=self.out)

        checks = {
            "every order PAID, except one CANCELLED and one REJECTED for stock": all(
                views[o].get("status") == want for o, want in self.expected.items()
            )
            and len(self.expected) == self.count,
            "paid orders carry their payment's operationId": all(
                views[o].get("paymentOperationId") == op for o, op in self.operations.items()
            ),
            "stock conserved: seeded = available + reserved, reserved = what live orders hold": all(
                available + reserved == self.levels[sku] and reserved == holding[sku]
                for sku, (available, reserved) in stock.items()
            ),
            "each OrderCreated/OrderPaid/OrderRejected notified exactly once": per_event
            == Counter({1: sum(t in NOTIFIED for t in events.values())}),
            "each order event archived, one reading per eventId, copies agreeing": all(
                archived[e] >= 1 for e in events
            )
            and not (archive and archive.conflicts),
            "nothing parked in the orders DLQs": parked == 0,
            "no HTTP errors (orders)": not self.http_errors,
        }
        print("", file=self.out)
        for name, ok in checks.items():
            print(f"  {'PASS' if ok else 'FAIL'}  {name}", file=self.out)
        return self._bus_section(views) and all(checks.values())

    def _points(self, customer_id: str) -> dict[str, Any]:
        response = self.sb.call("GET", f"/customers/{customer_id}/points")
        result: dict[str, Any] = response.json() if response.status_code == 200 else {}
        if response.status_code != 200:
            self.http_errors[f"GET points {response.status_code}"] += 1
        return result

    def _bus_section(self, views: dict[str, dict[str, Any]]) -> bool:
        """Shipping and points, fed by the app's bus, every batch delivered twice."""
        print(
            "\norders on the event bus: OrderPaid → rules → shipping and points "
            "(every batch delivered twice)",
            file=self.out,
        )
        paid = [o for o, want in self.expected.items() if want == "PAID"]
        unpaid = [o for o, want in self.expected.items() if want != "PAID"]
        per_unit = next(
            (
                int(f.environment["POINTS_PER_UNIT"])
                for f in self.sb.topology.functions.values()
                if "POINTS_PER_UNIT" in f.environment
            ),
            0,
        )
        self._wait(list(self.expected), lambda v: v.get("status") != "PAID" or v.get("shipment"))
        self.read.wait_idle()
        shipments = self.sb.shipping.shipments_by_order()
        customers = {o: f"customer-{i:02d}" for i, o in enumerate(self.baskets)}
        accounts = {o: self._points(customers[o]) for o in self.expected}

        def accruals(order_id: str) -> list[dict[str, Any]]:
            ledger = accounts[order_id].get("ledger") or []
            return [e for e in ledger if e.get("orderId") == order_id and e.get("kind") == "ACCRUAL"]

        def owed(order_id: str) -> int:
            return per_unit * sum(n for _, n in self.baskets[order_id])

        duplicated = sum(
            m.stats.duplicated_records
            for m in (self.sb.mappings.items if self.sb.mappings else [])
            if any(c in m.spec.function for c in BUS_CONSUMERS)
        )
        rows = [
            ("paid orders", str(len(paid))),
            ("shipments per paid order (shipping API)", _histogram(shipments.get(o, 0) for o in paid)),
            ("shipments for cancelled/rejected orders", str(sum(shipments.get(o, 0) for o in unpaid))),
            ("points accruals per paid order", _histogram(len(accruals(o)) for o in paid)),
            (
                "points balance of the unpaid orders' customers",
                _histogram(int(accounts[o].get("balance", -1)) for o in unpaid),
            ),
            ("bus records delivered a second time", str(duplicated)),
        ]
        width = max(len(r[0]) for r in rows)
        for label, value in rows:
            print(f"  {label:<{width}}  {value}", file=self.out)
        checks = {
            "every paid order shipped exactly once, and the order records it": all(
                shipments.get(o) == 1
                and (views[o].get("shipment") or {}).get("shipmentId")
                == (self.sb.shipping.shipment_for(o) or {}).get("shipmentId")
                for o in paid
            ),
            "every paid order credited with its points exactly once": all(
                len(accruals(o)) == 1
                and accruals(o)[0].get("points") == owed(o)
                and accounts[o].get("balance") == owed(o)
                for o in paid
            ),
            "no shipment and no points for the cancelled and the rejected order": all(
                not shipments.get(o) and not accruals(o) and accounts[o].get("balance") == 0 for o in unpaid
            ),
            "the bus consumers' batches were delivered twice": duplicated > 0,
        }
        print("", file=self.out)
        for name, ok in checks.items():
            print(f"  {'PASS' if ok else 'FAIL'}  {name}", file=self.out)
        return all(checks.values())

    def _movement(self, order_id: str, views: dict[str, dict[str, Any]]) -> str:
        lines = ", ".join(f"{n}× {sku}" for sku, n in self.baskets[order_id])
        status = views[order_id].get("status")
        if status in ("RESERVED", "PAID"):
            return f"took {lines}"
        if status == "CANCELLED":
            return (
                f"took then released {lines}"
                if self.read.reservation_status(order_id) == "RELEASED"
                else "took nothing"
            )
        if status == "REJECTED":
            reason = (views[order_id].get("rejection") or {}).get("reason", "")
            return f"took nothing ({reason})"
        return "?"


def _histogram(values: Any) -> str:
    counts = Counter(values)
    return ", ".join(f"{n}× {c}" for n, c in sorted(counts.items())) or "none"


class OrdersReader:
    """What the orders service holds in a running sandbox, read through the emulator's APIs (the
    demo's table and the e2e tests' assertions)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sb = sandbox
        tables = sandbox.topology.tables
        self.orders_table = next((t for t in tables if t.endswith("-orders-orders")), "")
        self.inventory_table = next((t for t in tables if t.endswith("-orders-inventory")), "")
        self.enabled = bool(self.orders_table and self.inventory_table)
        self.ddb = client("dynamodb", sandbox.endpoint)
        self.sqs = client("sqs", sandbox.endpoint)

    def queued(self, *, dlqs: bool) -> int:
        """Messages (visible and in flight) in the orders queues, or in their DLQs."""
        total = 0
        for name, url in self.sb.topology.queues.items():
            if "-orders-" in name and (name in self.sb.topology.dlqs) == dlqs:
                attrs = self.sqs.get_queue_attributes(
                    QueueUrl=url,
                    AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
                )["Attributes"]
                total += sum(int(v) for v in attrs.values())
        return total

    def wait_idle(self, stall: float = 30, cap: float = lifecycle.WAIT_CAP_SECONDS) -> bool:
        """True once the orders' queues and the runtime are idle; False once that stopped moving
        for ``stall`` seconds, or after ``cap`` seconds."""
        waiting = lifecycle.Patience(stall=stall, cap=cap)
        queued = in_flight = -1
        while waiting.more((queued, in_flight)):
            queued, in_flight = self.queued(dlqs=False), self.sb.in_flight()
            if not queued and not in_flight:
                return True
            time.sleep(0.5)
        return False

    def rows(self, order_id: str, prefix: str) -> list[dict[str, Any]]:
        """The order's items whose sort key starts with ``prefix`` (``OUTBOX#``, ``PAYMENT#``...)."""
        items: list[dict[str, Any]] = self.ddb.query(
            TableName=self.orders_table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": {"S": f"ORDER#{order_id}"}, ":prefix": {"S": prefix}},
            ConsistentRead=True,
        )["Items"]
        return items

    def events(self, order_ids: list[str]) -> dict[str, str]:
        """eventId -> eventType of every event the orders produced: the events each write added to an
        order item, read from the table's stream the way its publisher reads them
        (``relay.entity_events.new_events``), and outbox rows of the layout before."""
        from relay.entity_events import new_events

        events: dict[str, str] = {}
        for order_id in order_ids:
            for row in self.rows(order_id, "OUTBOX#"):
                _, event_type, event_id = row["sk"]["S"].split("#", 2)
                events[event_id] = event_type
        wanted = {f"ORDER#{order_id}" for order_id in order_ids}
        for record in stream_records(self.sb.endpoint, self.orders_table):
            if record["dynamodb"]["Keys"]["pk"]["S"] in wanted:
                events.update((e.event_id, e.event_type) for e in new_events(record))
        return events

    def archive(self) -> ArchiveRead | None:
        """The analytics archive, one copy per eventId (None: the stage has no analytics bucket)."""
        from ops.paths import use_function_code

        use_function_code()
        from orders.archive import read_archive

        bucket = next(
            (
                o.value
                for stack in self.sb.topology.stacks
                for o in stack.outputs
                if o.key == "AnalyticsBucketName"
            ),
            None,
        )
        if bucket is None:
            return None
        return read_archive(client("s3", self.sb.endpoint), bucket)

    def archived_event_ids(self) -> list[str]:
        """The eventId of every archived event, once each (Firehose may have delivered one twice)."""
        archive = self.archive()
        return [] if archive is None else list(archive.events)

    def stock(self, sku: str) -> tuple[int, int]:
        """(available, reserved) of a SKU; (0, 0) when it has no stock item."""
        item = self.ddb.get_item(
            TableName=self.inventory_table,
            Key={"pk": {"S": f"SKU#{sku}"}, "sk": {"S": "STOCK"}},
            ConsistentRead=True,
        ).get("Item", {})
        return int(item.get("available", {}).get("N", "0")), int(item.get("reserved", {}).get("N", "0"))

    def reservation_status(self, order_id: str) -> str | None:
        """What the order holds of the stock (RESERVED, RELEASED): its own ``stock``, or the reservation
        item of the layout before; None when it holds nothing."""
        order = self.ddb.get_item(
            TableName=self.orders_table,
            Key={"pk": {"S": f"ORDER#{order_id}"}, "sk": {"S": "ORDER"}},
            ConsistentRead=True,
        ).get("Item")
        if order and "stock" in order:
            return str(order["stock"]["S"])
        item = self.ddb.get_item(
            TableName=self.inventory_table,
            Key={"pk": {"S": f"ORDER#{order_id}"}, "sk": {"S": "RESERVATION"}},
            ConsistentRead=True,
        ).get("Item")
        return item["status"]["S"] if item else None
