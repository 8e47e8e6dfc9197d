"""A stage: any CDK app's synthesized templates, running on this machine as they would on AWS.

``Stage(StageConfig(app_root=...)).start()`` synthesizes the app into ``cdk.out`` when it is missing or
older than its sources, starts the emulator, provisions every stack, and brings up what AWS would run
around them: the Lambda runtime, the event source mappings, the HTTP APIs (SigV4 and IAM checked, with
two caller identities), EventBridge rules, Scheduler schedules and API destinations. IAM is enforced
for every call a function (or its mapping) makes. ``close()`` stops everything it started.

Nothing here knows an app. An app adds its own pieces by subclassing: ``start_services`` (fakes of the
systems it calls, started once the stacks exist), ``function_environment`` (per-function variables,
e.g. a fake's URL in place of a production one), ``stop_services`` and ``state_extra``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from emulator import callers, cloudformation
from emulator.alarm_service import AlarmService
from emulator.alarms import Transition
from emulator.control import ControlServer
from emulator.eventbridge import EventBridge, Firing, SchedulerClock
from emulator.http_api import HttpApi
from emulator.iam_report import DenialWatcher, bus_deliveries, enforce
from emulator.mappings import DuplicateDelivery, Mappings, SqsMapping
from emulator.provision import FunctionSpec, Provisioner, Topology
from emulator.runtime import Runtime
from emulator.server import ACCOUNT_ID, REGION, Emulator, client
from emulator.templates import is_stale, load_stacks, synth

# A path left at this default is placed under the app's root (``StageConfig.__post_init__``).
UNDER_APP_ROOT = Path()


@dataclass
class StageConfig:
    """Where the app is and how the stage runs it: ``cdk_out``, ``state_dir`` (``.sandbox``) and
    ``log_dir`` (``.sandbox/logs``) fall under ``app_root`` unless given."""

    app_root: Path = field(default_factory=Path.cwd)
    # What the synthesized app depends on (files or folders under app_root): a change to any makes
    # cdk.out stale.
    sources: tuple[str, ...] = ("app.py", "cdk.json")
    emulator_port: int = 4566
    api_port: int = 8000  # 0: any free port, bound when the API starts
    cdk_out: Path = UNDER_APP_ROOT
    state_dir: Path = UNDER_APP_ROOT
    log_dir: Path = UNDER_APP_ROOT
    max_workers_per_function: int = 3
    # Schedules' and rules' retries back off in fractions of a second instead of minutes.
    fast_clock: bool = True
    hour_every: float | None = None
    write_state: bool = True
    extra_env: dict[str, str] = field(default_factory=dict)
    # Function-name substrings ("*" for all) whose every batch is invoked twice.
    deliver_twice: tuple[str, ...] = ()
    # Scales every queue consumer's timeout with its queue's visibility timeout, keeping the template's
    # ratio. 1.0: the template's values.
    time_scale: float = 1.0
    # The variable that tells a consumer its queue's visibility timeout, set when time_scale changes it.
    visibility_timeout_variable: str | None = None

    def __post_init__(self) -> None:
        self.app_root = Path(self.app_root)
        if self.cdk_out == UNDER_APP_ROOT:
            self.cdk_out = self.app_root / "cdk.out"
        if self.state_dir == UNDER_APP_ROOT:
            self.state_dir = self.app_root / ".sandbox"
        if self.log_dir == UNDER_APP_ROOT:
            self.log_dir = self.state_dir / "logs"

    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    @property
    def caller_profiles(self) -> Path:
        """The ``credentials`` and ``config`` of the stage's callers (``emulator.callers``)."""
        return self.state_dir / "aws"


class Stage:
    def __init__(self, config: StageConfig | None = None, *, log: Any = print) -> None:
        self.config = config or StageConfig()
        self.log = log
        self.emulator = Emulator(self.config.emulator_port, log_path=self.config.log_dir / "moto.log")
        self.topology = Topology()
        self.runtime: Runtime | None = None
        self.mappings: Mappings | None = None
        self.apis: list[HttpApi] = []
        self.callers: dict[str, callers.Identity] = {}
        self.eventbridge: EventBridge | None = None
        self.clock: SchedulerClock | None = None
        self.control: ControlServer | None = None
        self.denials: DenialWatcher | None = None
        self.alarms: AlarmService | None = None

    # -- what an app adds -------------------------------------------------------------------------

    def start_services(self) -> None:
        """Start the app's own pieces (fakes of the systems it calls); the stacks exist by now."""

    def function_environment(self, name: str, spec: FunctionSpec) -> dict[str, str]:
        """Variables to set on one function, over its template's."""
        return {}

    def stop_services(self) -> None:
        """Stop what ``start_services`` started."""

    def state_extra(self) -> dict[str, Any]:
        """What the app adds to ``.sandbox/state.json``."""
        return {}

    # -- the stage --------------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        return self.emulator.endpoint

    @property
    def api_url(self) -> str:
        return self.apis[0].base_url if self.apis else ""

    def start(self) -> Any:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self) -> None:
        cfg = self.config
        if is_stale(cfg.cdk_out, cfg.app_root, cfg.sources):
            self.log(f"synthesizing the CDK app into {cfg.cdk_out} (missing or older than the sources)…")
            synth(cfg.cdk_out, cfg.app_root)
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
        self.start_services()
        scaled = self._scale_time(cfg.time_scale) if cfg.time_scale != 1.0 else {}
        overrides: dict[str, dict[str, str]] = {}
        for name, spec in self.topology.functions.items():
            env = self.function_environment(name, spec)
            env.update(scaled.get(name, {}))
            env.update(cfg.extra_env)
            overrides[name] = env
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
            "(SNS deliveries too). Denials are printed here as `IAM denied: …`."
        )
        self.denials = DenialWatcher(self.endpoint, self.log)
        self.denials.start()
        self.alarms = AlarmService(self.endpoint, cfg.log_dir, self.topology.functions, log=self.log)
        self.runtime.on_invoke = self.alarms.record_invocation
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
            api.start()  # port 0: bound now, so its base_url is known from here on
            if cfg.write_state:
                callers.write_profiles(cfg.caller_profiles, self.callers, REGION, self.endpoint, api.base_url)
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
        self.alarms.rule_failures = self.rule_failures
        self.clock = SchedulerClock(self.eventbridge, hour_every=cfg.hour_every, log=self.log)
        self.clock.start()
        self.control = ControlServer(self.eventbridge, alarms=self.alarms)
        self.control.start()
        self.alarms.start()
        self.log(
            f"alarms: {len(self.topology.alarms)} {self.alarms.describe()}; state changes published to their "
            "topics as CloudWatch does"
        )
        for line in self.schedule_banner():
            self.log(line)
        if cfg.write_state:
            cfg.state_file.parent.mkdir(parents=True, exist_ok=True)
            cfg.state_file.write_text(json.dumps(self.state(), indent=2))

    def _scale_time(self, scale: float) -> dict[str, dict[str, str]]:
        """Each SQS consumer's timeout and its queue's visibility timeout times ``scale`` (at least
        1 s each); the consumers' environment overrides that say the new visibility timeout."""
        if not 0.0 < scale <= 1.0:
            raise ValueError(f"time_scale {scale} must be in (0, 1]")
        sqs = client("sqs", self.endpoint)
        variable = self.config.visibility_timeout_variable
        visibilities: dict[str, int] = {}
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
            if spec.name not in visibilities:
                spec.timeout = max(1, round(spec.timeout * scale))
            sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": str(visibility)})
            # A function fed by two queues: the shorter visibility, so its heartbeat is never late.
            visibilities[spec.name] = min(visibilities.get(spec.name, visibility), visibility)
            changed.append(f"{url.rsplit('/', 1)[-1]} {current}→{visibility} s")
        self.log(
            f"time scale {scale:g}: queue consumers' timeouts and their queues' visibility timeouts "
            f"(ratio kept): {', '.join(changed)}"
        )
        if variable is None:
            return {}
        return {name: {variable: str(seconds)} for name, seconds in visibilities.items()}

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
                profiles = self.config.caller_profiles
                lines += [
                    f"  boto3/awscurl: AWS_SHARED_CREDENTIALS_FILE={profiles / 'credentials'} "
                    f"AWS_CONFIG_FILE={profiles / 'config'} AWS_PROFILE={callers.CLIENT}",
                    f"  curl: source {profiles / 'client.env'}; curl --aws-sigv4 "
                    f"'aws:amz:{REGION}:execute-api' --user \"$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY\" "
                    '"$API/operations/<operationId>"',
                ]
        return lines

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
            raise RuntimeError("the stage is not started")
        return self.eventbridge.fire_schedule(name, scheduled_time)

    def rule_failures(self) -> dict[tuple[str, str], tuple[int, int]]:
        """Per (event bus, rule), the events it could not deliver for good and those of them it sent to
        its DLQ, since the start: the API destinations' (``emulator.eventbridge``) and the bus rules' to
        their queues (``emulator.bus_delivery``, in the emulator). What EventBridge reports as
        FailedInvocations and InvocationsSentToDlq."""
        buses = {rule.name: rule.event_bus for rule in self.topology.rules}
        counts: dict[tuple[str, str], tuple[int, int]] = {}
        for delivery in list(self.eventbridge.deliveries) if self.eventbridge is not None else []:
            if not delivery.delivered:
                key = (buses.get(delivery.rule, "default"), delivery.rule)
                failed, to_dlq = counts.get(key, (0, 0))
                counts[key] = (failed + 1, to_dlq + int(delivery.dead_lettered))
        for rule, outcomes in bus_deliveries(self.endpoint).items():
            dropped = sum(n for outcome, n in outcomes.items() if outcome.startswith("dropped"))
            dead_lettered = outcomes.get("dead-lettered", 0)
            key = (buses.get(rule, "default"), rule)
            failed, to_dlq = counts.get(key, (0, 0))
            counts[key] = (failed + dropped + dead_lettered, to_dlq + dead_lettered)
        return counts

    def evaluate_alarms(self, advance: float = 0.0) -> list[Transition]:
        """Evaluate every alarm now, after moving the stage's clock on by ``advance`` seconds (a test's
        way to see a period end without waiting for it); the state changes, published to their topics."""
        if self.alarms is None:
            raise RuntimeError("the stage is not started")
        return self.alarms.evaluate(advance=advance)

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
            # The callers' keys (emulator.callers): stage-only identities, new secrets at every start, so
            # a client found through this state signs as a client would on AWS.
            "callers": {
                name: {"accessKeyId": i.access_key_id, "secretAccessKey": i.secret_access_key, "arn": i.arn}
                for name, i in self.callers.items()
            },
            "queues": self.topology.queues,
            "dlqs": sorted(self.topology.dlqs),
            "tables": sorted(self.topology.tables),
            **self.state_extra(),
        }

    @contextmanager
    def delivering_twice(self, *patterns: str) -> Iterator[None]:
        """Within the block, every batch for matching functions is invoked twice (see
        ``emulator.mappings.DuplicateDelivery``); the configured setting comes back afterwards."""
        if self.mappings is None:
            raise RuntimeError("the stage is not started")
        duplicates = self.mappings.duplicates
        before = tuple(duplicates.patterns)
        duplicates.set(tuple(patterns))
        try:
            yield
        finally:
            duplicates.set(before)

    @contextmanager
    def paused(self, function: str) -> Iterator[None]:
        """Within the block, the SQS mappings of the functions whose name contains ``function``
        receive nothing, as a disabled event source mapping would: what a test needs to hold work still."""
        if self.mappings is None:
            raise RuntimeError("the stage is not started")
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

    def environment_of(self, variable: str) -> Mapping[str, str]:
        """Function name -> the value of ``variable`` in its template, for the functions that have it."""
        return {
            name: spec.environment[variable]
            for name, spec in self.topology.functions.items()
            if variable in spec.environment
        }

    def close(self) -> None:
        if self.control is not None:
            self.control.close()
        if self.alarms is not None:
            self.alarms.close()
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
        self.stop_services()
        if self.denials is not None:
            self.denials.close()
            try:
                self.denials.poll()  # the last ones, before the emulator goes
            except OSError:
                pass
        self.emulator.stop()
        state_file = self.config.state_file
        if self.config.write_state and state_file.exists():
            try:
                if json.loads(state_file.read_text()).get("pid") == os.getpid():
                    state_file.unlink()
            except (OSError, ValueError):
                pass

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
