"""Relay's sandbox: the app-agnostic stage (``emulator.stage``) with Relay's fakes and fast clock.

``Sandbox(config).start()`` brings the whole app up from ``cdk.out`` (synthesizing it first when it
is missing or older than the sources); ``close()`` stops everything it started, worker processes,
the fakes and the emulator included, so Ctrl-C leaves no orphans.

What is Relay's here: the fakes of the systems Relay calls (legacy payments, invoice API, report
API, report-ready webhook, shipping API, the payments callback receiver) and their URLs in the
functions' variables; the fast clock (production retry and check timings shortened); the snapshot of
payment operations and orders the demo prints.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests

from emulator import callers
from emulator.provision import FunctionSpec
from emulator.server import REGION, aws_env, client
from emulator.stage import Stage, StageConfig
from local.fakes import (
    InvoiceApiFake,
    InvoiceKnobs,
    LegacyPaymentKnobs,
    LegacyPaymentsFake,
    ReportApiFake,
    ReportApiKnobs,
    ShippingApiFake,
    ShippingKnobs,
    WebhookFake,
    WebhookKnobs,
    knobs_from_env,
)
from ops.sigv4 import SigV4

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# What the synthesized app depends on: a change to any of these makes cdk.out stale.
SOURCE_PATHS = ("app.py", "cdk.json", "infra", "functions", "layers")
STATE_DIR = PROJECT_ROOT / ".sandbox"
STATE_FILE = STATE_DIR / "state.json"
CALLER_PROFILES = STATE_DIR / "aws"  # `credentials` and `config` of the sandbox's callers (emulator.callers)

# Config the templates hold for production that would make a local run take hours: retries of a
# sick dependency back off from 2 s up to 15 min, payment status checks start at 30 s. Overridden
# (and printed) only where a function already has the variable or reads it through the kernel.
FAST_CLOCK: dict[str, str] = {
    "RELAY_BACKOFF_BASE_SECONDS": "1",
    "RELAY_BACKOFF_CAP_SECONDS": "4",
    # How long a consumer re-sends transient failures before it parks them (production: 1 hour, about a
    # dozen attempts under the 15 min cap). Under a 4 s cap an hour is ~900 attempts, and each duplicate
    # delivery of a retry copy starts a chain of its own: 2 min (~30 attempts) keeps the chains bounded.
    "RELAY_RETRY_BUDGET_SECONDS": "120",
    "PAYMENT_CHECK_BASE_DELAY_SECONDS": "1",
    # A step silent this long counts as stranded for the sweeper (production: 15 min).
    "SILENCE_SECONDS": "5",
}
KERNEL_VARIABLES = {"RELAY_BACKOFF_BASE_SECONDS", "RELAY_BACKOFF_CAP_SECONDS"}
# The functions' timeouts for their calls to partners, scaled with their own timeouts when the stage's
# clock is (``time_scale``): a payment worker's 60 s against the legacy system's 10 s is 20 s against
# 3.3 s, not 20 s against 10 s, where one hung call in a batch would time the whole batch out.
PARTNER_TIMEOUTS = ("LEGACY_TIMEOUT_SECONDS", "HTTP_TIMEOUT_SECONDS", "NOTICE_TIMEOUT_SECONDS")
# The sandbox keeps every trace (the templates keep 1 %), so any operation's trace can be read back
# (``emulator.traces``); where a function has the variable.
TRACE_EVERYTHING: dict[str, str] = {"OTEL_TRACES_SAMPLER_ARG": "1"}


@dataclass
class SandboxConfig(StageConfig):
    app_root: Path = PROJECT_ROOT
    sources: tuple[str, ...] = SOURCE_PATHS
    # The kernel's consumers read their queue's visibility timeout from it (relay.consumer).
    visibility_timeout_variable: str | None = "RELAY_VISIBILITY_TIMEOUT_SECONDS"
    # FAST_CLOCK values replaced (chaos: the sweeper's silence scaled like the timeouts, not 5 s).
    clock_overrides: dict[str, str] = field(default_factory=dict)
    # Every trace kept (TRACE_EVERYTHING), for the console to draw any operation's; False keeps the
    # templates' sampling (1 %): chaos and the e2e tests, which read no trace, spend ~25 % less CPU
    # per operation (docs/measurements.md).
    trace_everything: bool = True


class Sandbox(Stage):
    config: SandboxConfig

    def __init__(self, config: SandboxConfig | None = None, *, log: Any = print) -> None:
        super().__init__(config or SandboxConfig(), log=log)
        self.legacy = LegacyPaymentsFake(
            LegacyPaymentKnobs().replace(**knobs_from_env(LegacyPaymentKnobs, os.environ))
        )
        self.invoices = InvoiceApiFake(InvoiceKnobs().replace(**knobs_from_env(InvoiceKnobs, os.environ)))
        self.reports = ReportApiFake(ReportApiKnobs().replace(**knobs_from_env(ReportApiKnobs, os.environ)))
        self.webhook = WebhookFake(WebhookKnobs().replace(**knobs_from_env(WebhookKnobs, os.environ)))
        self.shipping = ShippingApiFake(ShippingKnobs().replace(**knobs_from_env(ShippingKnobs, os.environ)))
        # Payments clients' callback receiver: checks each completion notice's signature with the key
        # the stack generated (read from the emulator once provisioned).
        self.receiver = WebhookFake(WebhookKnobs())
        self.fakes: dict[str, str] = {}

    def start(self) -> Sandbox:
        super().start()
        return self

    def __enter__(self) -> Sandbox:
        return self.start()

    def start_services(self) -> None:
        self.fakes = {
            "LEGACY_PAYMENTS_URL": self.legacy.start(),
            "INVOICE_API_URL": self.invoices.start(),
            "REPORT_API_URL": self.reports.start(),
            "NOTIFY_WEBHOOK_URL": self.webhook.start(),
            "SHIPPING_API_URL": self.shipping.start(),
        }
        fakes = self.fakes
        self.receiver.start()
        self.receiver.set_signing_secret(self.notice_signing_key())
        self.log(
            f"fakes: legacy payments {fakes['LEGACY_PAYMENTS_URL']}, invoice API {fakes['INVOICE_API_URL']}, "
            f"report API {fakes['REPORT_API_URL']}, report-ready webhook {fakes['NOTIFY_WEBHOOK_URL']}, "
            f"shipping API {fakes['SHIPPING_API_URL']}, "
            f"payments callback receiver {self.receiver.base_url} (verifies the Standard Webhooks signature)"
        )
        if self.config.fast_clock:
            self.log(
                "fast clock: "
                + ", ".join(f"{k}={v}" for k, v in {**FAST_CLOCK, **self.config.clock_overrides}.items())
                + " (template values are production timings)"
            )

    def function_environment(self, name: str, spec: FunctionSpec) -> dict[str, str]:
        env: dict[str, str] = {}
        for variable, url in self.fakes.items():
            if variable in spec.environment:
                env[variable] = url
        if "NOTIFY_WEBHOOK_URL" in spec.environment:
            # A webhook is a full URL (https://hooks.example.com/report-ready): keep its path.
            env["NOTIFY_WEBHOOK_URL"] = (
                self.fakes["NOTIFY_WEBHOOK_URL"] + urlsplit(spec.environment["NOTIFY_WEBHOOK_URL"]).path
            )
        if "CALLBACK_ALLOW_LOOPBACK_HTTP" in spec.environment:
            # The sandbox's callback receivers are local fakes: http on loopback (refused on AWS).
            env["CALLBACK_ALLOW_LOOPBACK_HTTP"] = "true"
        overrides = dict(TRACE_EVERYTHING) if self.config.trace_everything else {}
        if self.config.time_scale != 1.0:
            overrides.update(
                {
                    v: f"{float(spec.environment[v]) * self.config.time_scale:.2f}"
                    for v in PARTNER_TIMEOUTS
                    if v in spec.environment
                }
            )
        if self.config.fast_clock:
            overrides.update({**FAST_CLOCK, **self.config.clock_overrides})
        for variable, value in overrides.items():
            if variable in spec.environment or (
                variable in KERNEL_VARIABLES and "RELAY_QUEUE_URL" in spec.environment
            ):
                env[variable] = value
        return env

    def stop_services(self) -> None:
        self.legacy.stop()
        self.invoices.stop()
        self.reports.stop()
        self.webhook.stop()
        self.shipping.stop()
        self.receiver.stop()

    def state_extra(self) -> dict[str, Any]:
        return {
            "fakes": {
                "legacy": self.legacy.base_url,
                "invoice": self.invoices.base_url,
                "reportApi": self.reports.base_url,
                "webhook": self.webhook.base_url,
                "shipping": self.shipping.base_url,
                "callbackReceiver": self.receiver.base_url,
            },
        }

    def api_banner(self) -> list[str]:
        return [*super().api_banner(), "  `python -m local iam-report` lists the grants no call used"]

    def client_auth(self, name: str = callers.CLIENT) -> SigV4:
        """`requests` auth signing as one of the sandbox's callers (`emulator.callers`), as a client on AWS
        signs with its own identity's keys."""
        return SigV4(self.callers[name].credentials(), REGION)

    def call(self, method: str, path: str, *, timeout: float = 30, **kwargs: Any) -> requests.Response:
        """`method` `api_url + path`, signed as the sandbox's client: what the demo, `make cost` and the e2e
        tests send to the AWS_IAM routes."""
        url = f"{self.api_url}{path}"
        return requests.request(method, url, auth=self.client_auth(), timeout=timeout, **kwargs)

    def notice_signing_key(self) -> str | None:
        """The completion notices' HMAC key, as the notice sender reads it (its function's variable)."""
        arns = set(self.environment_of("NOTICE_SIGNING_SECRET_ARN").values())
        if not arns:
            return None
        (arn,) = arns
        return str(client("secretsmanager", self.endpoint).get_secret_value(SecretId=arn)["SecretString"])


ENTITY_TABLES = ("-operations", "-orders-orders")


def snapshot(state: dict[str, Any]) -> dict[str, Any]:
    """Queue depths, DLQ depths, and payment operations and orders by state, read from the emulator."""
    endpoint = state["endpoint"]
    sqs = client("sqs", endpoint)
    ddb = client("dynamodb", endpoint)
    queues: dict[str, dict[str, int]] = {}
    for name, url in sorted(state["queues"].items()):
        attrs = sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        queues[name] = {
            "visible": int(attrs.get("ApproximateNumberOfMessages", 0)),
            "inFlight": int(attrs.get("ApproximateNumberOfMessagesNotVisible", 0)),
        }
    operations: Counter[str] = Counter()
    orders: Counter[str] = Counter()
    # Only the tables that hold operations and orders: scanning every table (idempotency records,
    # outbox history...) each second was a large share of the emulator's CPU during the demo.
    for table in (t for t in state["tables"] if t.endswith(ENTITY_TABLES)):
        paginator = ddb.get_paginator("scan")
        for page in paginator.paginate(
            TableName=table,
            ProjectionExpression="pk, sk, #s",
            ExpressionAttributeNames={"#s": "status"},
        ):
            for item in page.get("Items", []):
                sort_key = item.get("sk", {}).get("S")
                if "status" not in item:
                    continue
                if sort_key == "OPERATION":
                    operations[item["status"]["S"]] += 1
                elif sort_key == "ORDER":
                    orders[item["status"]["S"]] += 1
    dlqs = set(state["dlqs"])
    return {
        "queues": {n: q for n, q in queues.items() if n not in dlqs},
        "dlqs": {n: q["visible"] + q["inFlight"] for n, q in queues.items() if n in dlqs},
        "operations": dict(operations),
        "orders": dict(orders),
    }


def stream_records(endpoint: str, table: str) -> Iterator[dict[str, Any]]:
    """Every record of ``table``'s stream, oldest first, as its stream publisher receives them (the
    stream keeps 24 hours: a whole sandbox run)."""
    ddb = client("dynamodb", endpoint)
    streams = client("dynamodbstreams", endpoint)
    arn = ddb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            answer = streams.get_records(ShardIterator=iterator, Limit=1000)
            yield from answer.get("Records", [])
            if not answer.get("Records"):
                break
            iterator = answer.get("NextShardIterator")


def status_line(snap: dict[str, Any]) -> str:
    depth = sum(q["visible"] for q in snap["queues"].values())
    flight = sum(q["inFlight"] for q in snap["queues"].values())
    parked = sum(snap["dlqs"].values())
    ops = " ".join(f"{k}={v}" for k, v in sorted(snap["operations"].items())) or "none"
    line = f"queued {depth}  in flight {flight}  DLQ {parked}  operations: {ops}"
    if snap.get("orders"):
        line += "  orders: " + " ".join(f"{k}={v}" for k, v in sorted(snap["orders"].items()))
    return line


def cli_hint(endpoint: str) -> str:
    env = aws_env(endpoint)
    return (
        f"AWS_ACCESS_KEY_ID={env['AWS_ACCESS_KEY_ID']} AWS_SECRET_ACCESS_KEY={env['AWS_SECRET_ACCESS_KEY']} "
        f"AWS_DEFAULT_REGION={env['AWS_DEFAULT_REGION']} aws --endpoint-url {endpoint} sqs list-queues"
    )
