"""The sandbox: emulator + provisioning + local runtime + event source mappings + HTTP API + fakes.

``Sandbox(config).start()`` brings the whole app up from ``cdk.out`` (synthesizing it first when it
is missing or older than the sources); ``close()`` stops everything it started, worker processes
and the emulator included, so Ctrl-C leaves no orphans.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests

from local import callers, cloudformation
from local.control import ControlServer
from local.emulator import ACCOUNT_ID, REGION, Emulator, aws_env, client
from local.eventbridge import EventBridge, Firing, SchedulerClock
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
from local.http_api import HttpApi
from local.iam_report import DenialWatcher, enforce
from local.mappings import DuplicateDelivery, Mappings, SqsMapping
from local.provision import Provisioner, Topology
from local.runtime import PROJECT_ROOT, Runtime
from local.templates import is_stale, load_stacks, synth
from ops.sigv4 import SigV4

STATE_DIR = PROJECT_ROOT / ".sandbox"
STATE_FILE = STATE_DIR / "state.json"
CALLER_PROFILES = STATE_DIR / "aws"  # `credentials` and `config` of the sandbox's callers (local.callers)

# Config the templates hold for production that would make a local run take hours: retries of a
# sick dependency back off from 2 s up to 15 min, payment status checks start at 30 s. Overridden
# (and printed) only where a function already has the variable or reads it through the kernel.
FAST_CLOCK: dict[str, str] = {
    "RELAY_BACKOFF_BASE_SECONDS": "1",
    "RELAY_BACKOFF_CAP_SECONDS": "4",
    "PAYMENT_CHECK_BASE_DELAY_SECONDS": "1",
    # A step silent this long counts as stranded for the sweeper (production: 15 min).
    "SILENCE_SECONDS": "5",
}
KERNEL_VARIABLES = {"RELAY_BACKOFF_BASE_SECONDS", "RELAY_BACKOFF_CAP_SECONDS"}


@dataclass
class SandboxConfig:
    emulator_port: int = 4566
    api_port: int = 8000
    cdk_out: Path = PROJECT_ROOT / "cdk.out"
    max_workers_per_function: int = 3
    fast_clock: bool = True
    hour_every: float | None = None
    write_state: bool = True
    log_dir: Path = STATE_DIR / "logs"
    extra_env: dict[str, str] = field(default_factory=dict)
    # Chaos: function-name substrings ("*" for all) whose every batch is invoked twice.
    deliver_twice: tuple[str, ...] = ()
    # Scales every queue consumer's timeout with its queue's visibility timeout (and the consumer's
    # RELAY_VISIBILITY_TIMEOUT_SECONDS), keeping the template's ratio: a batch lost to a crash comes
    # back after 1/6 of the production wait at 1/6. 1.0: the template's values.
    time_scale: float = 1.0
    # FAST_CLOCK values replaced (chaos: the sweeper's silence scaled like the timeouts, not 5 s).
    clock_overrides: dict[str, str] = field(default_factory=dict)


class Sandbox:
    def __init__(self, config: SandboxConfig | None = None, *, log: Any = print) -> None:
        self.config = config or SandboxConfig()
        self.log = log
        self.emulator = Emulator(self.config.emulator_port, log_path=self.config.log_dir / "moto.log")
        self.topology = Topology()
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
        self.runtime: Runtime | None = None
        self.mappings: Mappings | None = None
        self.apis: list[HttpApi] = []
        self.callers: dict[str, callers.Identity] = {}
        self.eventbridge: EventBridge | None = None
        self.clock: SchedulerClock | None = None
        self.control: ControlServer | None = None
        self.denials: DenialWatcher | None = None

    @property
    def endpoint(self) -> str:
        return self.emulator.endpoint

    @property
    def api_url(self) -> str:
        return self.apis[0].base_url if self.apis else ""

    def start(self) -> Sandbox:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self) -> None:
        cfg = self.config
        if is_stale(cfg.cdk_out, PROJECT_ROOT):
            self.log(f"synthesizing the CDK app into {cfg.cdk_out} (missing or older than the sources)…")
            synth(cfg.cdk_out, PROJECT_ROOT)
        self.emulator.start()
        self.log(f"emulator: moto server on {self.endpoint}")
        stacks = load_stacks(cfg.cdk_out)
        self.topology = Provisioner(self.endpoint, cfg.cdk_out).provision(stacks)
        for line in self.topology.report():
            self.log(line)
        described = cloudformation.publish(self.endpoint, self.topology.stacks)
        self.log(
            f"CloudFormation: DescribeStacks answers the {described} provisioned stacks, outputs resolved "
            "(moto's own CloudFormation holds none of them)"
        )
        fakes = {
            "LEGACY_PAYMENTS_URL": self.legacy.start(),
            "INVOICE_API_URL": self.invoices.start(),
            "REPORT_API_URL": self.reports.start(),
            "NOTIFY_WEBHOOK_URL": self.webhook.start(),
            "SHIPPING_API_URL": self.shipping.start(),
        }
        self.receiver.start()
        self.receiver.set_signing_secret(self.notice_signing_key())
        self.log(
            f"fakes: legacy payments {fakes['LEGACY_PAYMENTS_URL']}, invoice API {fakes['INVOICE_API_URL']}, "
            f"report API {fakes['REPORT_API_URL']}, report-ready webhook {fakes['NOTIFY_WEBHOOK_URL']}, "
            f"shipping API {fakes['SHIPPING_API_URL']}, "
            f"payments callback receiver {self.receiver.base_url} (verifies the Standard Webhooks signature)"
        )
        scaled = self._scale_time(cfg.time_scale) if cfg.time_scale != 1.0 else {}
        overrides: dict[str, dict[str, str]] = {}
        for name, spec in self.topology.functions.items():
            env: dict[str, str] = {}
            for variable, url in fakes.items():
                if variable in spec.environment:
                    env[variable] = url
            if "NOTIFY_WEBHOOK_URL" in spec.environment:
                # A webhook is a full URL (https://hooks.example.com/report-ready): keep its path.
                env["NOTIFY_WEBHOOK_URL"] = (
                    fakes["NOTIFY_WEBHOOK_URL"] + urlsplit(spec.environment["NOTIFY_WEBHOOK_URL"]).path
                )
            if "CALLBACK_ALLOW_LOOPBACK_HTTP" in spec.environment:
                # The sandbox's callback receivers are local fakes: http on loopback (refused on AWS).
                env["CALLBACK_ALLOW_LOOPBACK_HTTP"] = "true"
            if cfg.fast_clock:
                for variable, value in {**FAST_CLOCK, **cfg.clock_overrides}.items():
                    if variable in spec.environment or (
                        variable in KERNEL_VARIABLES and "RELAY_QUEUE_URL" in spec.environment
                    ):
                        env[variable] = value
            env.update(scaled.get(name, {}))
            env.update(cfg.extra_env)
            overrides[name] = env
        if cfg.fast_clock:
            self.log(
                "fast clock: "
                + ", ".join(f"{k}={v}" for k, v in {**FAST_CLOCK, **cfg.clock_overrides}.items())
                + " (template values are production timings)"
            )
        self.runtime = Runtime(
            self.topology.functions,
            endpoint=self.endpoint,
            log_dir=cfg.log_dir,
            max_workers=cfg.max_workers_per_function,
            env_overrides=overrides,
        )
        self.log(
            f"runtime: {len(self.topology.functions)} functions, up to {cfg.max_workers_per_function} "
            f"warm workers each; logs in {cfg.log_dir}/"
        )
        loaded = enforce(self.endpoint, self.topology)
        self.log(
            f"IAM: enforced. Each function signs with its own credentials and every AWS call it (or its "
            f"event source mapping) makes is authorized against its synthesized role: "
            f"{loaded['functions']} roles, {loaded['resourcePolicies']} queue/topic/bucket policies "
            "(SNS deliveries too). Denials are printed here as `IAM denied: …`; "
            "`python -m local iam-report` lists unused grants."
        )
        self.denials = DenialWatcher(self.endpoint, self.log)
        self.denials.start()
        self.mappings = Mappings(
            self.topology.mappings,
            self.runtime,
            self.endpoint,
            self.log,
            DuplicateDelivery(cfg.deliver_twice),
        )
        if cfg.deliver_twice:
            matching = ", ".join(cfg.deliver_twice)
            self.log(f"chaos: every batch delivered twice to functions matching {matching}")
        self.mappings.start()
        if self.topology.apis:
            # Every HTTP API on one port: their routes are disjoint, and one base URL is simpler.
            self.callers = callers.provision(REGION, ACCOUNT_ID, [a.api_id for a in self.topology.apis])
            api = HttpApi(self.topology.apis, self.runtime, cfg.api_port, callers=self.callers.values())
            if cfg.write_state:
                callers.write_profiles(CALLER_PROFILES, self.callers, REGION, self.endpoint, api.base_url)
            api.start()
            self.apis.append(api)
            for line in self.api_banner():
                self.log(line)
        self.eventbridge = EventBridge(
            self.topology,
            self.endpoint,
            apis=self.topology.apis,
            local_api_url=self.api_url,
            fast_clock=cfg.fast_clock,
            log=self.log,
        )
        self.clock = SchedulerClock(self.eventbridge, hour_every=cfg.hour_every, log=self.log)
        self.clock.start()
        self.control = ControlServer(self.eventbridge)
        self.control.start()
        for line in self.schedule_banner():
            self.log(line)
        if cfg.write_state:
            STATE_DIR.mkdir(parents=True, exist_ok=True)
            STATE_FILE.write_text(json.dumps(self.state(), indent=2))

    def _scale_time(self, scale: float) -> dict[str, dict[str, str]]:
        """Each SQS consumer's timeout and its queue's visibility timeout times ``scale`` (at least
        1 s each); the consumers' environment overrides that say the new visibility timeout."""
        if not 0.0 < scale <= 1.0:
            raise ValueError(f"time_scale {scale} must be in (0, 1]")
        sqs = client("sqs", self.endpoint)
        env: dict[str, dict[str, str]] = {}
        changed = []
        for mapping in self.topology.mappings:
            if mapping.kind != "sqs":
                continue
            spec = self.topology.functions[mapping.function]
            url = self.topology.queues[mapping.source_arn.rsplit(":", 1)[-1]]
            current = int(
                sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])["Attributes"][
                    "VisibilityTimeout"
                ]
            )
            visibility = max(1, round(current * scale))
            if spec.name not in env:
                spec.timeout = max(1, round(spec.timeout * scale))
            sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": str(visibility)})
            # A function fed by two queues: the shorter visibility, so its heartbeat is never late.
            known = int(env.get(spec.name, {}).get("RELAY_VISIBILITY_TIMEOUT_SECONDS", visibility))
            env[spec.name] = {"RELAY_VISIBILITY_TIMEOUT_SECONDS": str(min(known, visibility))}
            changed.append(f"{url.rsplit('/', 1)[-1].removeprefix('relay-dev-')} {current}→{visibility} s")
        self.log(
            f"time scale {scale:g}: queue consumers' timeouts and their queues' visibility timeouts "
            f"(ratio kept): {', '.join(changed)}"
        )
        return env

    def api_banner(self) -> list[str]:
        lines = []
        for api in self.apis:
            for spec in api.specs:
                lines.append(f"HTTP API {spec.name} ({spec.stack}): {api.base_url}")
                for route in spec.routes:
                    auth = f"  [{route.authorization}]" if route.authorization != "NONE" else ""
                    if route.authorizer is not None:
                        auth = f"  [Lambda authorizer {route.authorizer.function}]"
                    lines.append(f"  {route.route_key:40s} → {route.function}{auth}")
            lines.extend(f"  not served: {clash}" for clash in api.clashes)
        if any(r.authorization == "AWS_IAM" for spec in self.topology.apis for r in spec.routes):
            lines.append(
                "  AWS_IAM routes verify SigV4 (execute-api) and execute-api:Invoke, as API Gateway does: "
                f"sign as {callers.CLIENT} (allowed) or {callers.DENIED} (no grant)"
            )
            if self.config.write_state:
                lines += [
                    f"  boto3/awscurl: AWS_SHARED_CREDENTIALS_FILE={CALLER_PROFILES / 'credentials'} "
                    f"AWS_CONFIG_FILE={CALLER_PROFILES / 'config'} AWS_PROFILE={callers.CLIENT}",
                    f"  curl: source {CALLER_PROFILES / 'client.env'}; curl --aws-sigv4 "
                    f"'aws:amz:{REGION}:execute-api' --user \"$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY\" "
                    '"$API/operations/<operationId>"',
                ]
        return lines

    def client_auth(self, name: str = callers.CLIENT) -> SigV4:
        """`requests` auth signing as one of the sandbox's callers (`local.callers`), as a client on AWS
        signs with its own identity's keys."""
        return SigV4(self.callers[name].credentials(), REGION)

    def call(self, method: str, path: str, *, timeout: float = 30, **kwargs: Any) -> requests.Response:
        """`method` `api_url + path`, signed as the sandbox's client: what the demo, `make cost` and the e2e
        tests send to the AWS_IAM routes."""
        url = f"{self.api_url}{path}"
        return requests.request(method, url, auth=self.client_auth(), timeout=timeout, **kwargs)

    def schedule_banner(self) -> list[str]:
        topo = self.topology
        if not topo.schedules and not topo.rules:
            return ["schedules: none declared by the templates"]
        lines = []
        for schedule in topo.schedules:
            call = (
                f"SendMessage to queue {schedule.target_name}"
                if schedule.target_kind == "sqs"
                else f"PutEvents {schedule.detail_type!r} on {schedule.target_name}"
            )
            lines.append(
                f"schedule {schedule.name}: {schedule.expression} {schedule.timezone} → {call} "
                f"(retries {schedule.retry.maximum_retry_attempts}, max age "
                f"{schedule.retry.maximum_event_age_seconds} s, DLQ {bool(schedule.dlq_arn)})"
            )
        for rule in topo.rules:
            for target in rule.targets:
                destination = topo.api_destinations.get(target.arn)
                where = (
                    f"API destination {destination.method} {destination.endpoint}"
                    if destination
                    else target.arn
                )
                lines.append(
                    f"rule {rule.name}: {json.dumps(rule.pattern)} → {where} "
                    f"(retries {target.retry.maximum_retry_attempts}, max age "
                    f"{target.retry.maximum_event_age_seconds} s, DLQ {bool(target.dlq_arn)})"
                )
        if self.clock is not None:
            lines.append(f"scheduler clock: {self.clock.describe()}")
        if self.eventbridge is not None and topo.api_destinations:
            lines.append(f"API destinations to the app's own APIs are called on {self.api_url} (same path)")
        return lines

    def schedule_named(self, suffix: str) -> str:
        """The one schedule whose name ends with ``suffix`` (e.g. ``scores-hourly-snapshot``)."""
        (name,) = [s.name for s in self.topology.schedules if s.name.endswith(suffix)]
        return name

    def fire_schedule(
        self, name: str | None = None, scheduled_time: datetime | str | None = None
    ) -> list[Firing]:
        """Fire a schedule now (default: all); ``Firing.wait()`` waits for the API destination calls."""
        if self.eventbridge is None:
            raise RuntimeError("the sandbox is not started")
        return self.eventbridge.fire_schedule(name, scheduled_time)

    def state(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "endpoint": self.endpoint,
            "cdkOut": str(self.config.cdk_out),
            "apiUrls": [a.base_url for a in self.apis],
            "apis": [
                {"name": s.name, "url": a.base_url, "routes": [r.route_key for r in s.routes]}
                for a in self.apis
                for s in a.specs
            ],
            "schedules": [
                {"name": s.name, "expression": s.expression, "timezone": s.timezone}
                for s in self.topology.schedules
            ],
            "control": self.control.url if self.control else None,
            # The callers' keys (local.callers): sandbox-only identities, new secrets at every start, so a
            # client found through this state (ops smoke) signs as a client would on AWS.
            "callers": {
                name: {"accessKeyId": i.access_key_id, "secretAccessKey": i.secret_access_key, "arn": i.arn}
                for name, i in self.callers.items()
            },
            "queues": self.topology.queues,
            "dlqs": sorted(self.topology.dlqs),
            "tables": sorted(self.topology.tables),
            "fakes": {
                "legacy": self.legacy.base_url,
                "invoice": self.invoices.base_url,
                "reportApi": self.reports.base_url,
                "webhook": self.webhook.base_url,
                "shipping": self.shipping.base_url,
                "callbackReceiver": self.receiver.base_url,
            },
        }

    @contextmanager
    def delivering_twice(self, *patterns: str) -> Iterator[None]:
        """Within the block, every batch for matching functions is invoked twice (see
        ``local.mappings.DuplicateDelivery``); the configured setting comes back afterwards."""
        if self.mappings is None:
            raise RuntimeError("the sandbox is not started")
        duplicates = self.mappings.duplicates
        before = tuple(duplicates.patterns)
        duplicates.set(tuple(patterns))
        try:
            yield
        finally:
            duplicates.set(before)

    def notice_signing_key(self) -> str | None:
        """The completion notices' HMAC key, as the notice sender reads it (its function's variable)."""
        from local.emulator import client

        arns = {
            spec.environment["NOTICE_SIGNING_SECRET_ARN"]
            for spec in self.topology.functions.values()
            if "NOTICE_SIGNING_SECRET_ARN" in spec.environment
        }
        if not arns:
            return None
        (arn,) = arns
        return str(client("secretsmanager", self.endpoint).get_secret_value(SecretId=arn)["SecretString"])

    @contextmanager
    def paused(self, function: str) -> Iterator[None]:
        """Within the block, the SQS mappings of the functions whose name contains ``function``
        (``"PaymentWorker"``) receive nothing, as a disabled event source mapping would: what a test
        needs to hold work still."""
        if self.mappings is None:
            raise RuntimeError("the sandbox is not started")
        chosen = [m for m in self.mappings.items if isinstance(m, SqsMapping) and function in m.spec.function]
        if not chosen:
            raise ValueError(f"no SQS mapping feeds a function named like {function!r}")
        for mapping in chosen:
            mapping.paused.set()
        try:
            yield
        finally:
            for mapping in chosen:
                mapping.paused.clear()

    def in_flight(self) -> int:
        """Records the event source mappings hold and have not finished: 0 means that whatever the
        queues do not show is done (a stream batch waiting out its retry backoff counts, as do stream
        records not read yet)."""
        return sum(item.pending() for item in self.mappings.items) if self.mappings else 0

    def close(self) -> None:
        if self.control is not None:
            self.control.close()
        if self.clock is not None:
            self.clock.close()
        if self.eventbridge is not None:
            self.eventbridge.close()
        if self.mappings is not None:
            self.mappings.close()
        for api in self.apis:
            api.close()
        if self.runtime is not None:
            self.runtime.close()
        self.legacy.stop()
        self.invoices.stop()
        self.reports.stop()
        self.webhook.stop()
        self.shipping.stop()
        self.receiver.stop()
        if self.denials is not None:
            self.denials.close()
            try:
                self.denials.poll()  # the last ones, before the emulator goes
            except OSError:
                pass
        self.emulator.stop()
        if self.config.write_state and STATE_FILE.exists():
            try:
                if json.loads(STATE_FILE.read_text()).get("pid") == os.getpid():
                    STATE_FILE.unlink()
            except (OSError, ValueError):
                pass

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()


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
