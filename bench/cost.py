"""Cost per million operations, measured: ``make cost`` (``python bench/cost.py``).

Runs N operations of each flow through the local sandbox and counts every AWS request each makes, by
caller, service and action (``emulator.request_meter``, in the emulator), including what the managed
glue makes on AWS's side: the event source mappings' ReceiveMessage, DeleteMessageBatch and stream
GetRecords (callers ``glue:esm (<function>)``), SNS's deliveries to SQS, the bus's deliveries to its
rules' queues, and the Scheduler and API-destination invocations. Then prices them with the
checked-in list prices (``bench/prices.json``: us-east-1, each with its source URL and the date read)
and prints $ per 1M operations per flow with a breakdown, writing the same figures to
``.sandbox/cost.json``.

Flows (each measured alone, from a quiet sandbox, until every queue is empty and no request arrives):
* ``payments``: POST /payments → COMPLETED (charged, post-processed, invoiced), then one GET.
* ``orders``: POST /orders → RESERVED, its payment (POST /payments with orderId) → PAID, shipped
  and credited with points (the bus rules), then one GET /orders/{id}: the payment is included.
* ``reports``: a ReportGenerated on report-events (the producer's SNS publish is priced) → VERIFIED
  by read-back, the report-ready webhook once.
* ``snapshot``: the hourly schedule fired once → the scores API via the API destination → one
  snapshot per agent (the agents of the reports flow).

What is and is not an operation's cost:
* Lambda duration is not measured: the sandbox's timings are not AWS's (its DynamoDB is an emulator
  ~100x slower than DynamoDB's single-digit milliseconds). Each invocation is priced at
  ``DURATION_MS`` (default 60 ms: a warm arm64 invocation making a few AWS calls of ~5-10 ms each)
  at the function's configured memory; ``--duration-ms`` changes it.
* An event source mapping's EMPTY receives are idle polling, not per-operation cost: on AWS a queue's
  pollers long-poll 20 s whatever the traffic. They are shown as a fixed monthly cost per queue.
* The driver's own reads (waiting for completion through the emulator) are callers ``other`` and not
  counted; the flow's one client GET is.
* CloudWatch: the functions' log bytes (Powertools logs and EMF metrics) per operation at the logs
  ingestion price; custom metrics are a fixed monthly cost, not per operation.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "layers" / "relay" / "python"))

from bench.pricing import Measured, breakdown, counts, price  # noqa: E402
from emulator.iam_enforcer import CONTROL_PREFIX  # noqa: E402
from emulator.server import client, free_port  # noqa: E402
from local.demo import publish_report  # noqa: E402
from local.sandbox import Sandbox, SandboxConfig  # noqa: E402

DURATION_MS = 60.0
# An idle queue's Lambda pollers (5 at first) each long-poll 20 s: 5 x 3 a minute, all month.
IDLE_RECEIVES_PER_QUEUE_MONTH = 5 * 3 * 60 * 24 * 30


def _meter(sb: Sandbox, *, reset: bool = False) -> list[dict[str, Any]]:
    method = "DELETE" if reset else "GET"
    request = __import__("urllib.request").request.Request(
        f"{sb.endpoint}{CONTROL_PREFIX}meter", method=method
    )
    with __import__("urllib.request").request.urlopen(request, timeout=30) as answer:
        rows: list[dict[str, Any]] = json.loads(answer.read())
        return rows


# Work that runs on a clock, not per operation: the payments sweeper (its schedule and its function).
PERIODIC = ("Sweeper", "-payments-sweep")


def periodic(caller: str) -> bool:
    return any(p in caller for p in PERIODIC)


def _idle(sb: Sandbox) -> bool:
    sqs = client("sqs", sb.endpoint)
    for name, url in sb.topology.queues.items():
        if name in sb.topology.dlqs:
            continue
        attrs = sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        if any(int(v) for v in attrs.values()):
            return False
    return sb.in_flight() == 0


def _settle(sb: Sandbox, timeout: float = 180) -> None:
    """Every queue empty, nothing in flight, and no billed request for 3 s (the streams' publishers
    and the bus's consumers included)."""
    deadline = time.monotonic() + timeout
    quiet_since, last = time.monotonic(), -1.0
    while time.monotonic() < deadline:
        # Idle polling (empty receives and GetRecords, a shard iterator now and then) is not work.
        busy = sum(
            r["requests"] - r["empty"]
            for r in _meter(sb)
            if r["caller"] != "other" and r["service"] != "dynamodbstreams" and not periodic(r["caller"])
        )
        if busy != last or not _idle(sb):
            quiet_since, last = time.monotonic(), busy
        elif time.monotonic() - quiet_since >= 3:
            return
        time.sleep(0.5)
    raise RuntimeError("the sandbox did not settle")


def _invocations(sb: Sandbox) -> dict[str, int]:
    assert sb.runtime is not None
    return {name: fn.invocations for name, fn in sb.runtime.functions.items()}


def _table_calls(sb: Sandbox) -> dict[tuple[str, str, str, str], int]:
    """(function, action, table, operation) -> the DynamoDB calls the emulator authorized for each
    function so far (its IAM report): one per item of a transaction or a batch, on that item's table,
    with the API operation that made it (a TransactWriteItems' Put is the action PutItem of the
    operation TransactWriteItems), and the stream reads its event source mapping made with the
    function's role (action GetRecords). The meter counts requests per action; this says which tables
    they touched (``bench/capacity.py`` reads both)."""
    from emulator.iam_report import fetch_report

    calls: dict[tuple[str, str, str, str], int] = {}
    for fn in fetch_report(sb.endpoint)["functions"]:
        for call, n in fn["operation_calls"].items():
            operation, action, resource = call.split(" ", 2)
            if action.startswith("dynamodb:") and ":table/" in resource:
                table = resource.split(":table/", 1)[1].split("/", 1)[0]
                key = (str(fn["function"]), action.removeprefix("dynamodb:"), table, operation)
                calls[key] = calls.get(key, 0) + int(n)
    return calls


def _indexes(sb: Sandbox) -> dict[str, list[str]]:
    """Each table's global secondary indexes, as deployed."""
    ddb = client("dynamodb", sb.endpoint)
    return {
        table: [
            i["IndexName"]
            for i in ddb.describe_table(TableName=table)["Table"].get("GlobalSecondaryIndexes", [])
        ]
        for table in sb.topology.tables
    }


def _log_sizes(sb: Sandbox) -> dict[str, int]:
    sizes = {}
    for name in sb.topology.functions:
        path = sb.config.log_dir / f"{name}.log"
        sizes[name] = path.stat().st_size if path.exists() else 0
    return sizes


Drive = Callable[[], tuple[int, int]]  # runs the flow; (producer publishes, client HTTP requests)


def measure(sb: Sandbox, flow: str, operations: int, drive: Drive) -> Measured:
    _settle(sb)
    _meter(sb, reset=True)
    invocations, logs = _invocations(sb), _log_sizes(sb)
    table_calls = _table_calls(sb)
    bridge = sb.eventbridge
    firings = bridge.firings if bridge else 0
    calls = len(bridge.deliveries) if bridge else 0
    started = time.monotonic()
    producer, http = drive()
    _settle(sb)
    after = _invocations(sb)
    logs_after = _log_sizes(sb)
    rows = _meter(sb)
    table_calls_after = _table_calls(sb)
    return Measured(
        flow=flow,
        operations=operations,
        periodic_requests=int(
            sum(r["requests"] for r in rows if periodic(r["caller"]) and "glue" not in r["caller"])
        ),
        periodic_runs=sum(after[k] - invocations.get(k, 0) for k in after if periodic(k)),
        requests=[r for r in rows if r["caller"] != "other" and not periodic(r["caller"])],
        invocations={
            k: after[k] - invocations.get(k, 0)
            for k in after
            if after[k] - invocations.get(k, 0) and not periodic(k)
        },
        log_bytes={k: logs_after[k] - logs.get(k, 0) for k in logs_after if logs_after[k] - logs.get(k, 0)},
        schedule_firings=(bridge.firings if bridge else 0) - firings,
        api_destination_calls=(len(bridge.deliveries) if bridge else 0) - calls,
        producer_publishes=producer,
        http_requests=http + (len(bridge.deliveries) if bridge else 0) - calls,
        seconds=time.monotonic() - started,
        trace_sample_rates=_trace_sample_rates(sb),
        table_calls=[
            {
                "function": key[0],
                "action": key[1],
                "table": key[2],
                "operation": key[3],
                "calls": n - table_calls.get(key, 0),
            }
            for key, n in sorted(table_calls_after.items())
            if n > table_calls.get(key, 0) and not periodic(key[0])
        ],
    )


# -- the flows ------------------------------------------------------------------------------------


def _wait_items(
    sb: Sandbox,
    table_suffix: str,
    keys: list[dict[str, Any]],
    done: Callable[[dict[str, Any]], bool],
    timeout: float = 600,
) -> None:
    table = next(t for t in sb.topology.tables if t.endswith(table_suffix))
    ddb = client("dynamodb", sb.endpoint)
    pending = list(keys)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        item = ddb.get_item(TableName=table, Key=pending[0], ConsistentRead=True).get("Item", {})
        if done(item):
            pending.pop(0)
        else:
            time.sleep(0.3)
    if pending:
        raise RuntimeError(f"{len(pending)} item(s) of {table} not done in {timeout} s")


def _payment(order_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "paymentId": f"cost-{uuid.uuid4().hex[:10]}",
        "amount": "10.00",
        "currency": "EUR",
        "payer": "cost-bench",
        "payee": "relay-shop",
        "details": {},
    }
    if order_id:
        body["orderId"] = order_id
    return body


def _post(sb: Sandbox, path: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = sb.call("POST", path, json=body, headers={"Idempotency-Key": uuid.uuid4().hex})
    answer.raise_for_status()
    result: dict[str, Any] = answer.json()
    return result


def payments_flow(sb: Sandbox, n: int) -> Drive:
    def drive() -> tuple[int, int]:
        ids = [_post(sb, "/payments", _payment())["operationId"] for _ in range(n)]
        keys = [{"pk": {"S": f"OPERATION#{i}"}, "sk": {"S": "OPERATION"}} for i in ids]
        _wait_items(sb, "-operations", keys, lambda item: item.get("status", {}).get("S") == "COMPLETED")
        for operation_id in ids:  # the client reads the outcome once
            sb.call("GET", f"/operations/{operation_id}").raise_for_status()
        return 0, 2 * n

    return drive


def orders_flow(sb: Sandbox, n: int) -> Drive:
    from ops.seed_stock import seed_stock

    def drive() -> tuple[int, int]:
        sku = f"COST-{uuid.uuid4().hex[:6]}"
        inventory = next(t for t in sb.topology.tables if t.endswith("-orders-inventory"))
        seed_stock({sku: 10 * n}, table=inventory, ddb_client=client("dynamodb", sb.endpoint))
        body = {"customerId": "cost-bench", "items": [{"sku": sku, "quantity": 2}], "currency": "EUR"}
        ids = [_post(sb, "/orders", body)["orderId"] for _ in range(n)]
        keys = [{"pk": {"S": f"ORDER#{i}"}, "sk": {"S": "ORDER"}} for i in ids]
        _wait_items(sb, "-orders-orders", keys, lambda item: item.get("status", {}).get("S") == "RESERVED")
        for order_id in ids:
            _post(sb, "/payments", _payment(order_id))
        _wait_items(sb, "-orders-orders", keys, lambda item: "shipment" in item)
        for order_id in ids:
            sb.call("GET", f"/orders/{order_id}").raise_for_status()
        return 0, 3 * n

    return drive


def reports_flow(sb: Sandbox, n: int) -> Drive:
    def drive() -> tuple[int, int]:
        ids = []
        for i in range(n):
            report_id = f"cost-{uuid.uuid4().hex[:8]}"
            publish_report(
                sb,
                report_id,
                f"cost-agent-{i % 5}",
                f"report {report_id}".encode(),
                correlation_id="cost-bench",
            )
            ids.append(report_id)
        keys = [{"pk": {"S": f"REPORT#{r}"}, "sk": {"S": "VERIFICATION"}} for r in ids]
        _wait_items(
            sb, "-reports-verifications", keys, lambda item: item.get("status", {}).get("S") == "VERIFIED"
        )
        return n, 0  # the producer's publishes

    return drive


def snapshot_flow(sb: Sandbox, n: int) -> Drive:
    def drive() -> tuple[int, int]:
        assert sb.eventbridge is not None
        from datetime import UTC, datetime, timedelta

        hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        for i in range(n):
            for firing in sb.eventbridge.fire_schedule(
                "hourly-snapshot" if False else None, hour - timedelta(hours=i)
            ):
                firing.wait()
        return 0, 0

    return drive


# -- pricing --------------------------------------------------------------------------------------


def _trace_sample_rates(sb: Sandbox) -> dict[str, float]:
    """Each function's share of traces kept as its template says (the sandbox overrides it to 1)."""
    return {
        name: float(spec.environment.get("OTEL_TRACES_SAMPLER_ARG", "1"))
        for name, spec in sb.topology.functions.items()
    }


def _memory_gb(sb: Sandbox, function: str) -> float:
    return sb.topology.functions[function].memory / 1024


# -- the floor ------------------------------------------------------------------------------------

# The fewest requests a payment needs for what the design guarantees -- accepted only once durable,
# each step applied once, every event published at least once and marked, charged and invoiced once,
# the outcome readable -- at production batch sizes (SQS batches of 10, stream batches of 100,
# PublishBatch of 10) and with payloads small enough to travel inline (no claim check). Step by step:
FLOOR_BATCH, FLOOR_STREAM_BATCH, FLOOR_PUBLISH_BATCH = 10, 100, 10
PAYMENT_STEPS = 3  # payment, post-processing, invoice: each a consumer of one event
PAYMENT_EVENTS = 4  # PaymentRequested, PaymentCompleted, PostProcessed, InvoiceIssued (one per change)
# Both floors mark and publish each event, and consume at production batch sizes.
_MARK_PUBLISH_AND_BATCHES: dict[str, tuple[str, float, str]] = {
    "mark": ("dynamodb.wru", PAYMENT_EVENTS, "each event marked published once (the sweeper's evidence)"),
    "publish": ("sns.publish", PAYMENT_EVENTS / FLOOR_PUBLISH_BATCH, "PublishBatch of 10 events"),
    "stream-lambda": (
        "lambda.request",
        PAYMENT_EVENTS / FLOOR_STREAM_BATCH,
        "the publisher, per stream batch",
    ),
    "receive": ("sqs.request", PAYMENT_STEPS / FLOOR_BATCH, "the mapping's ReceiveMessage, per batch of 10"),
    "delete": ("sqs.request", PAYMENT_STEPS / FLOOR_BATCH, "its DeleteMessageBatch"),
    "step-lambda": ("lambda.request", PAYMENT_STEPS / FLOOR_BATCH, "one invocation per batch of 10"),
}

FLOOR_PAYMENT: dict[str, tuple[str, float, str]] = {
    "api": ("apigateway.http_request", 2, "POST /payments and one GET /operations/{id}"),
    "api-lambda": ("lambda.request", 2, "one invocation per HTTP request"),
    "accept": (
        "dynamodb.wru",
        1,
        "ONE conditional PutItem: the operation (its id derived from the Idempotency-Key, so the item "
        "itself refuses a second one) with its first event inside it, published from the stream",
    ),
    "read": ("dynamodb.rru", 1, "the GET: one strongly consistent GetItem"),
    "step-read": ("dynamodb.rru", PAYMENT_STEPS, "each step reads the operation once"),
    "step-write": (
        "dynamodb.wru",
        PAYMENT_STEPS,
        "each step: ONE conditional UpdateItem of the operation (state, version, the processed eventId "
        "and the next event in the item)",
    ),
    **_MARK_PUBLISH_AND_BATCHES,
}


# -- the design's floor ---------------------------------------------------------------------------

# The fewest requests a payment needs with the structures ../shared/DESIGN.md names (one write per
# step), at the same production batch sizes and with every item under 1 KB: accepting is ONE
# conditional PutItem with the first event inside it, every step ONE conditional UpdateItem of the
# operation (its processed eventId and next event inside it), the intermediate states
# (PAYMENT_PROCESSING, POST_PROCESSING) one plain update each, payloads inline (no claim check below
# 64 KB), and the deadline index written twice per operation (entered at accept, left once the last
# event is published, by the one "mark"). What Relay pays above it is its implementation's; what this
# pays above FLOOR_PAYMENT is the design's (the intermediate states and the index).
DESIGN_FLOOR_PAYMENT: dict[str, tuple[str, float, str]] = {
    "api": ("apigateway.http_request", 2, "POST /payments and one GET /operations/{id}"),
    "api-lambda": ("lambda.request", 2, "one invocation per HTTP request"),
    "accept": ("dynamodb.wru", 1, "ONE conditional PutItem: the operation with its first event inside"),
    "read": ("dynamodb.rru", 1, "the GET: one strongly consistent GetItem"),
    "step-read": ("dynamodb.rru", PAYMENT_STEPS, "each step reads the operation once"),
    "step-write": ("dynamodb.wru", PAYMENT_STEPS, "each step: ONE conditional UpdateItem of the operation"),
    "intermediate": (
        "dynamodb.wru",
        2,
        "PENDING -> PAYMENT_PROCESSING and PAYMENT_COMPLETED -> POST_PROCESSING: one plain update each",
    ),
    "deadline-index": ("dynamodb.wru", 2, "the deadline index: entered at accept, left at the end"),
    "mark": ("dynamodb.wru", 1, "the ended operation leaves the index once its last event is out"),
    **{k: v for k, v in _MARK_PUBLISH_AND_BATCHES.items() if k != "mark"},
}


# -- the naive variant ----------------------------------------------------------------------------

# What a careful team would write without the kernel, built and measured (``bench/naive_payments.py``,
# real boto3 and Powertools under moto, every request metered by the app's own meter): Powertools
# idempotency on each handler plus a separate business write, ONE SNS Publish per event straight from
# the handler (no outbox), and no batching (batch size 1). Its payloads go through S3 as the app's do,
# so the comparison is about the messaging and idempotency, not the payloads.


def naive_payments(operations: int) -> Measured:
    """The naive variant's N payments as a ``Measured`` (its own in-process moto: call it with no
    sandbox running in this process, since ``mock_aws`` patches every botocore client)."""
    from bench.naive_payments import measure_naive

    return measure_naive(operations).measured()


def model_lines(
    model: dict[str, tuple[str, float, str]], duration_ms: float, memory_gb: float
) -> dict[str, float]:
    """$ per payment of a modelled variant, by line (the same prices and duration as measured)."""
    lines = {name: price(key, units) for name, (key, units, _) in model.items()}
    invocations = sum(units for key, units, _ in model.values() if key == "lambda.request")
    lines["lambda-duration"] = price("lambda.gb_second.arm64", invocations * duration_ms / 1000 * memory_gb)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="make cost")
    parser.add_argument("--operations", type=int, default=int(os.environ.get("COST_OPERATIONS", "30")))
    parser.add_argument("--duration-ms", type=float, default=DURATION_MS)
    parser.add_argument("--json", type=Path, default=ROOT / ".sandbox" / "cost.json")
    parser.add_argument("--flows", default="payments,orders,reports,snapshot", help="comma-separated")
    args = parser.parse_args(argv)
    n = args.operations
    config = SandboxConfig(
        emulator_port=free_port(),
        api_port=free_port(),
        write_state=False,
        log_dir=args.json.parent / "cost-logs",  # .sandbox/cost-logs by default; beside a --json elsewhere
    )
    results: dict[str, Any] = {"operations_per_flow": n, "duration_ms_assumed": args.duration_ms, "flows": {}}
    with Sandbox(config, log=lambda *_: None) as sb:
        flows = [
            ("payments", n, payments_flow(sb, n)),
            ("orders", n, orders_flow(sb, n)),
            ("reports", n, reports_flow(sb, n)),
            ("snapshot", 2, snapshot_flow(sb, 2)),
        ]
        queues = sum(1 for name in sb.topology.queues if name not in sb.topology.dlqs)
        memory_gb = next(_memory_gb(sb, f) for f in sb.topology.functions if "-payments-PaymentWorker" in f)
        chosen = args.flows.split(",")
        for flow, ops, drive in [f for f in flows if f[0] in chosen]:
            m = measure(sb, flow, ops, drive)
            lines = breakdown(m, args.duration_ms, lambda function: _memory_gb(sb, function))
            total = sum(lines.values())
            results["flows"][flow] = {
                "operations": ops,
                "usd_per_million": total * 1e6,
                "breakdown_usd_per_million": {
                    k: v * 1e6 for k, v in sorted(lines.items(), key=lambda kv: -kv[1])
                },
                "requests_per_operation": counts(m),
                "invocations_per_operation": {
                    k.split("-", 2)[-1]: v / ops for k, v in sorted(m.invocations.items())
                },
                "log_bytes_per_operation": sum(m.log_bytes.values()) / ops,
                "by_caller_per_operation": [
                    {
                        **r,
                        "requests": r["requests"] / ops,
                        "billed": r["billed"] / ops,
                        "empty": r["empty"] / ops,
                        **({"entries": r["entries"] / ops} if "entries" in r else {}),
                    }
                    for r in m.requests
                ],
                "table_calls_per_operation": [{**c, "calls": c["calls"] / ops} for c in m.table_calls],
                "sandbox_seconds": m.seconds,
                "sweeper_runs": m.periodic_runs,
                "sweeper_requests_per_run": m.periodic_requests / m.periodic_runs
                if m.periodic_runs
                else None,
            }
            print(f"\n{flow}: ${total * 1e6:,.2f} per 1M operations ({ops} measured in {m.seconds:.1f} s)")
            print(f"cost_per_million_{flow}_usd: {total * 1e6:.2f}")
            for line, usd in sorted(lines.items(), key=lambda kv: -kv[1]):
                print(f"  {line:<52} ${usd * 1e6:>9,.2f}")
        idle = queues * price("sqs.request", IDLE_RECEIVES_PER_QUEUE_MONTH)
        results["fixed_monthly_usd"] = {"idle_polling": idle, "queues": queues}
        results["indexes"] = _indexes(sb)
        print(
            f"\nfixed, not per operation: idle polling of {queues} queues ≈ ${idle:,.2f} a month "
            "(Lambda's pollers long-poll 20 s)"
        )
    if "payments" in results["flows"]:
        payments = results["flows"]["payments"]["usd_per_million"]
        floor_lines = model_lines(FLOOR_PAYMENT, args.duration_ms, memory_gb)
        measured = results["flows"]["payments"]["breakdown_usd_per_million"]
        # Measured after the sandbox closed: its mock_aws would capture the sandbox's clients.
        naive_m = naive_payments(n)
        naive_lines = breakdown(naive_m, args.duration_ms, lambda _: memory_gb)
        # No Powertools Logger in the variant: the app's log bytes per invocation, for its invocations.
        invocations = sum(results["flows"]["payments"]["invocations_per_operation"].values())
        logs = measured.get("CloudWatch Logs (logs + EMF)", 0.0) / 1e6
        naive_lines["CloudWatch Logs (logs + EMF)"] = (
            logs / max(invocations, 1e-9) * sum(naive_m.invocations.values()) / naive_m.operations
        )
        results["naive_requests_per_operation"] = counts(naive_m)
        naive = sum(naive_lines.values()) * 1e6
        floor = sum(floor_lines.values()) * 1e6
        design_lines = model_lines(DESIGN_FLOOR_PAYMENT, args.duration_ms, memory_gb)
        design_floor = sum(design_lines.values()) * 1e6
        results["design_floor_usd"] = design_floor
        results["design_floor_breakdown_usd_per_million"] = {k: v * 1e6 for k, v in design_lines.items()}
        results["payments_over_design_floor"] = payments / design_floor
        results["cost_per_million_payments_usd"] = payments
        results["floor_usd"] = floor
        results["floor_breakdown_usd_per_million"] = {k: v * 1e6 for k, v in floor_lines.items()}
        results["payments_over_floor"] = payments / floor
        results["naive_usd"] = naive
        results["naive_breakdown_usd_per_million"] = {k: v * 1e6 for k, v in naive_lines.items()}
        results["payments_over_naive"] = payments / naive
        for title, lines in (
            ("floor (FLOOR_PAYMENT)", floor_lines),
            ("the design's floor (DESIGN_FLOOR_PAYMENT)", design_lines),
            ("naive (bench/naive_payments.py, measured)", naive_lines),
        ):
            print(f"\n{title}, same prices and duration assumption:")
            for name, usd in sorted(lines.items(), key=lambda kv: -kv[1]):
                print(f"  {name:<52} ${usd * 1e6:>9,.2f}")
        print(f"\ncost_per_million_payments_usd: {payments:.2f}")
        print(f"floor_usd: {floor:.2f}   ratio: {payments / floor:.2f}x (goal <= 1.5x)")
        print(f"naive_usd: {naive:.2f}   ratio: {payments / naive:.2f}x (goal <= 0.7x)")
        print(
            f"design_floor_usd: {design_floor:.2f}   ratio: {payments / design_floor:.2f}x "
            f"(the design over the floor: {design_floor / floor:.2f}x)"
        )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
