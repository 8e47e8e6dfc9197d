"""The sandbox: emulator + provisioning + local runtime + event source mappings + HTTP API + fakes.

``Sandbox(config).start()`` brings the whole app up from ``cdk.out`` (synthesizing it first when it
is missing or older than the sources); ``close()`` stops everything it started, worker processes
and the emulator included, so Ctrl-C leaves no orphans.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from local.emulator import Emulator, aws_env, client
from local.fakes import InvoiceApiFake, InvoiceKnobs, LegacyPaymentKnobs, LegacyPaymentsFake, knobs_from_env
from local.http_api import HttpApi
from local.mappings import Mappings
from local.provision import Provisioner, Topology
from local.runtime import PROJECT_ROOT, Runtime
from local.templates import is_stale, load_stacks, synth

STATE_DIR = PROJECT_ROOT / ".sandbox"
STATE_FILE = STATE_DIR / "state.json"

# Config the templates hold for production that would make a local run take hours: retries of a
# sick dependency back off from 2 s up to 15 min, payment status checks start at 30 s. Overridden
# (and printed) only where a function already has the variable or reads it through the kernel.
FAST_CLOCK: dict[str, str] = {
    "RELAY_BACKOFF_BASE_SECONDS": "1",
    "RELAY_BACKOFF_CAP_SECONDS": "4",
    "PAYMENT_CHECK_BASE_DELAY_SECONDS": "1",
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
        self.runtime: Runtime | None = None
        self.mappings: Mappings | None = None
        self.apis: list[HttpApi] = []

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
        fakes = {"LEGACY_PAYMENTS_URL": self.legacy.start(), "INVOICE_API_URL": self.invoices.start()}
        self.log(
            f"fakes: legacy payments {fakes['LEGACY_PAYMENTS_URL']}, invoice API {fakes['INVOICE_API_URL']}"
        )
        overrides: dict[str, dict[str, str]] = {}
        for name, spec in self.topology.functions.items():
            env: dict[str, str] = {}
            for variable, url in fakes.items():
                if variable in spec.environment:
                    env[variable] = url
            if cfg.fast_clock:
                for variable, value in FAST_CLOCK.items():
                    if variable in spec.environment or (
                        variable in KERNEL_VARIABLES and "RELAY_QUEUE_URL" in spec.environment
                    ):
                        env[variable] = value
            env.update(cfg.extra_env)
            overrides[name] = env
        if cfg.fast_clock:
            self.log(
                "fast clock: "
                + ", ".join(f"{k}={v}" for k, v in FAST_CLOCK.items())
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
        self.mappings = Mappings(self.topology.mappings, self.runtime, self.endpoint, self.log)
        self.mappings.start()
        for i, api_spec in enumerate(self.topology.apis):
            api = HttpApi(api_spec, self.runtime, cfg.api_port + i)
            api.start()
            self.apis.append(api)
            self.log(f"HTTP API {api_spec.name}: {api.base_url}")
            for route in api_spec.routes:
                self.log(f"  {route.route_key:40s} → {route.function}")
            if any(r.authorization == "AWS_IAM" for r in api_spec.routes):
                self.log("  note: AWS_IAM-authorized routes are NOT verified locally (no SigV4 check)")
        self.log(
            "schedules, rules and API destinations: not materialized (the templates declare none yet; "
            "`fire-schedule` has nothing to fire)"
        )
        if cfg.write_state:
            STATE_DIR.mkdir(parents=True, exist_ok=True)
            STATE_FILE.write_text(json.dumps(self.state(), indent=2))

    def state(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "endpoint": self.endpoint,
            "apiUrls": [a.base_url for a in self.apis],
            "queues": self.topology.queues,
            "dlqs": sorted(self.topology.dlqs),
            "tables": sorted(self.topology.tables),
            "fakes": {"legacy": self.legacy.base_url, "invoice": self.invoices.base_url},
        }

    def in_flight(self) -> int:
        return sum(item.stats.in_flight for item in self.mappings.items) if self.mappings else 0

    def close(self) -> None:
        if self.mappings is not None:
            self.mappings.close()
        for api in self.apis:
            api.close()
        if self.runtime is not None:
            self.runtime.close()
        self.legacy.stop()
        self.invoices.stop()
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


def snapshot(state: dict[str, Any]) -> dict[str, Any]:
    """Queue depths, DLQ depths and operations by state, read from the emulator."""
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
    for table in state["tables"]:
        paginator = ddb.get_paginator("scan")
        for page in paginator.paginate(
            TableName=table,
            ProjectionExpression="pk, sk, #s",
            ExpressionAttributeNames={"#s": "status"},
        ):
            for item in page.get("Items", []):
                if item.get("sk", {}).get("S") == "OPERATION" and "status" in item:
                    operations[item["status"]["S"]] += 1
    dlqs = set(state["dlqs"])
    return {
        "queues": {n: q for n, q in queues.items() if n not in dlqs},
        "dlqs": {n: q["visible"] + q["inFlight"] for n, q in queues.items() if n in dlqs},
        "operations": dict(operations),
    }


def status_line(snap: dict[str, Any]) -> str:
    depth = sum(q["visible"] for q in snap["queues"].values())
    flight = sum(q["inFlight"] for q in snap["queues"].values())
    parked = sum(snap["dlqs"].values())
    ops = " ".join(f"{k}={v}" for k, v in sorted(snap["operations"].items())) or "none"
    return f"queued {depth}  in flight {flight}  DLQ {parked}  operations: {ops}"


def cli_hint(endpoint: str) -> str:
    env = aws_env(endpoint)
    return (
        f"AWS_ACCESS_KEY_ID={env['AWS_ACCESS_KEY_ID']} AWS_SECRET_ACCESS_KEY={env['AWS_SECRET_ACCESS_KEY']} "
        f"AWS_DEFAULT_REGION={env['AWS_DEFAULT_REGION']} aws --endpoint-url {endpoint} sqs list-queues"
    )
