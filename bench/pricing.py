"""What metered requests cost: the checked-in list prices (``bench/prices.json``), the one billing rule
(which price a metered request is billed under) and a flow's figures per operation.

Both the measured app (``bench/cost.py``) and the naive variant (``bench/naive_payments.py``) are priced
here, so the two are billed by the same rule; neither imports the other for it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PRICES = json.loads((Path(__file__).resolve().parent / "prices.json").read_text())["prices"]


def price(key: str, units: float) -> float:
    entry = PRICES[key]
    return float(entry["usd"]) * units / float(entry["per"])


@dataclass
class Measured:
    """What one flow's N operations made, per operation."""

    flow: str
    operations: int
    requests: list[dict[str, Any]] = field(default_factory=list)  # the meter's rows (deltas)
    invocations: dict[str, int] = field(default_factory=dict)  # function -> invocations
    log_bytes: dict[str, int] = field(default_factory=dict)  # function -> bytes logged
    schedule_firings: int = 0
    api_destination_calls: int = 0
    producer_publishes: int = 0  # what the flow's producer published (outside the app)
    http_requests: int = 0  # requests to the app's HTTP APIs (the clients', the API destination's)
    seconds: float = 0.0
    # The clock-driven work (the sweeper), left out of the per-operation figures: its requests per run,
    # to show they do not grow with the volume in flight.
    periodic_requests: int = 0
    periodic_runs: int = 0
    # (function, action, table, calls): which tables the DynamoDB requests touched (bench/cost.py).
    table_calls: list[dict[str, Any]] = field(default_factory=list)
    # function -> the share of traces its template keeps (OTEL_TRACES_SAMPLER_ARG). The sandbox keeps
    # every trace, so the spans it meters are priced at the deployed share.
    trace_sample_rates: dict[str, float] = field(default_factory=dict)


def billed_as(service: str, action: str, caller: str) -> tuple[str, str | None]:
    """The breakdown line a metered request goes to, and the ``bench/prices.json`` key it is billed
    under (None: AWS does not charge it)."""
    where = "glue" if caller.startswith("glue:") else "code"
    if action == "Deliver to Firehose":
        return "SNS deliveries to Firehose", "sns.delivery.firehose"
    if service == "firehose":
        if action == "Record bytes":  # billed by the 5 KB units; counted for the MiB/s quota
            return "Firehose record bytes (priced as 5 KB units)", None
        return "Firehose ingestion (5 KB units)", "firehose.ingest_5kb"
    if action == "Deliver to SQS":
        if service == "sns":
            return "SNS deliveries to SQS (free)", "sns.delivery.sqs"
        return "EventBridge deliveries to SQS (free)", "events.delivery"
    if service == "sqs":
        return f"SQS {action} ({where})", "sqs.request"
    if service == "sns":
        return f"SNS {action}", "sns.publish"
    if service == "dynamodb":
        if action in ("GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"):
            return f"DynamoDB {action} (read units)", "dynamodb.rru"
        return f"DynamoDB {action} (write units)", "dynamodb.wru"
    if service == "dynamodbstreams":
        return "DynamoDB Streams (Lambda trigger: free)", None
    if service == "s3":
        return f"S3 {action}", "s3.put" if action in ("PutObject", "POST", "CopyObject") else "s3.get"
    if service == "events":
        return f"EventBridge {action}", "events.put"
    if service == "secretsmanager":
        return f"Secrets Manager {action}", "secretsmanager.api"
    if service == "xray":
        return "X-Ray spans (sampled share, as Logs ingestion)", "xray.spans_byte"
    return f"{service} {action}", None


def breakdown(m: Measured, duration_ms: float, memory_gb: Callable[[str], float]) -> dict[str, float]:
    """$ per operation, by line (service: what). ``memory_gb``: a function's configured memory."""
    lines: dict[str, float] = defaultdict(float)
    for row in m.requests:
        billed = float(row["billed"]) - row["empty"]  # idle polling: a fixed cost, not the operation's
        if row["service"] == "xray":  # exported by the function's own code, never by the glue
            billed *= m.trace_sample_rates.get(row["caller"], 1.0)
        line, key = billed_as(row["service"], row["action"], row["caller"])
        lines[line] += price(key, billed) if key else 0.0
    for function, count in m.invocations.items():
        lines["Lambda requests"] += price("lambda.request", count)
        lines["Lambda duration"] += price(
            "lambda.gb_second.arm64", count * duration_ms / 1000 * memory_gb(function)
        )
    lines["CloudWatch Logs (logs + EMF)"] += price("logs.ingest_gb", sum(m.log_bytes.values()) / 1024**3)
    lines["EventBridge Scheduler invocations"] += price("scheduler.invocation", m.schedule_firings)
    lines["EventBridge API destination calls"] += price("events.api_destination", m.api_destination_calls)
    lines["SNS Publish (the producer's)"] += price("sns.publish", m.producer_publishes)
    lines["API Gateway HTTP API requests"] += price("apigateway.http_request", m.http_requests)
    return {k: v / m.operations for k, v in lines.items() if v or "(free)" in k}


def counts(m: Measured) -> dict[str, float]:
    """Requests per operation by service and action (empty receives apart)."""
    out: defaultdict[str, float] = defaultdict(float)
    for row in m.requests:
        out[f"{row['service']}:{row['action']}"] += (row["requests"] - row["empty"]) / m.operations
        if row["empty"]:
            out[f"{row['service']}:{row['action']} (empty, idle polling)"] += row["empty"] / m.operations
    out["lambda:Invoke"] += sum(m.invocations.values()) / m.operations
    return dict(sorted(out.items()))
