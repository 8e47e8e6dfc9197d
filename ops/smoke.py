"""``python -m ops smoke``: one black-box suite for a deployed stage (``make smoke STAGE=dev``) and for the
local sandbox (``make smoke STAGE=local``; CI runs the same suite against the e2e session's sandbox,
``tests/e2e/test_smoke_e2e.py``), with one line per check, PASS or FAIL with the figure or the reason;
exit 0 only if every check passes, 1 if one fails, 2 if the stage cannot be reached (a one-paragraph
error: no credentials, no region, no such stacks, the endpoint down).

What it checks, as a user relies on it:
- the stacks ``relay-<stage>-core|payments|orders|reports|scores|loyalty`` are deployed (a ``*_COMPLETE``
  status) with the outputs the suite reads;
- an invalid ``POST /payments`` body → 400 with field errors, and nothing stored: the same Idempotency-Key
  is then accepted fresh with a valid body (a key bound to the invalid request would answer 422);
- that payment → COMPLETED (``GET /operations/{id}`` polled until a deadline), and a retry under the same
  Idempotency-Key answers the same operation;
- an order placed → reserved → paid (through payments) → shipped once: the order records one shipment,
  unchanged after a settling wait (3 s in the sandbox, 10 s on AWS); in the sandbox the shipping API fake
  also counts exactly one shipment for it (on AWS the shipping API is the partner's: its count cannot be
  seen from outside, and the line says so);
- the scores API's ``POST /score-snapshots`` → 401 without its API key;
- every queue has its DLQ and an alarm: each work queue (the stacks' ``WorkQueueNames`` outputs, and
  every other queue ``ops`` discovers) has a DLQ, an alarm on itself and one on its DLQ's depth, and every
  other DLQ is alarmed (CloudWatch DescribeAlarms; in the sandbox the alarms ``cdk.out`` declares, read
  by ``ops.app`` as ``python -m ops doctor`` reads them);
- the hourly snapshot schedule is ENABLED (EventBridge Scheduler GetSchedule);
- ``python -m ops doctor`` is clean (run in process, on the same connection);
- in the sandbox only: no call was denied by IAM during the run (AWS would have denied it).

How it finds the stage: CloudFormation DescribeStacks of the six stacks, and their outputs
(``infra/constructs/outputs.py``: each HTTP API's URL, ``WorkQueueNames``, ``InventoryTableName``,
``HourlyScheduleName``). It calls with the caller's credentials (boto3's default chain); every HTTP call is
SigV4-signed for ``execute-api`` (botocore's ``SigV4Auth`` over the exact request sent, payload included),
as the AWS_IAM routes require on AWS. ``STAGE=local`` means the sandbox: the running one (``make local``,
found by ``.sandbox/state.json``), else (``python -m local smoke``, what ``make smoke STAGE=local`` runs)
one started for the run on free ports and stopped after it: the sandbox is Relay's (``local``), so ops
never starts one itself. The sandbox answers DescribeStacks for the stacks it provisioned
(``emulator/cloudformation.py``) and serves every HTTP API on one local port, so each API URL the outputs
give (``https://<id>.execute-api…``) is called there, same path, signed the same way (the sandbox verifies
SigV4 as API Gateway does). A sandbox started for the run logs to a temporary directory, removed after a
clean run and named when a check failed.

What it leaves behind: only its own operations, tagged ``smoke-<UTC time>-<4 hex>`` (the run's tag): two
payment operations (paymentId and Idempotency-Key ``<tag>-payment`` / ``<tag>-order-payment``, ``details
{"smoke": <tag>}``), one order of customer ``<tag>`` with what its consumers record (its notifications,
analytics records, shipment, the customer's loyalty points). The stock item it seeds for SKU ``<tag>-sku``
is deleted once the order is paid (while an order holds a reservation the item stays, and the line says so).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ops.app import (
    DECLARED,
    DEFAULT_TEMPLATES,
    SANDBOX_STATE,
    AlarmInfo,
    App,
    OpsError,
    QueueInfo,
    add_connection_arguments,
    is_loopback,
)

STACKS = ("core", "payments", "orders", "reports", "scores", "loyalty")
# The outputs the suite reads, per stack (infra/constructs/outputs.py writes them).
OUTPUTS: dict[str, tuple[str, ...]] = {
    "payments": ("PaymentsApiUrl", "WorkQueueNames"),
    "orders": ("OrdersApiUrl", "InventoryTableName", "WorkQueueNames"),
    "reports": ("WorkQueueNames",),
    "scores": ("ScoresApiUrl", "HourlyScheduleName", "WorkQueueNames"),
    "loyalty": ("LoyaltyApiUrl", "WorkQueueNames"),
}
COMPLETE = frozenset({"CREATE_COMPLETE", "UPDATE_COMPLETE", "IMPORT_COMPLETE"})
LOCAL_STAGE = "local"  # --stage local: the sandbox, whatever stage its cdk.out was synthesized for
CHECKS = ("stacks", "payments", "orders", "scores", "queues", "schedule", "doctor", "iam")
PAYMENT_TERMINAL = frozenset({"COMPLETED", "FAILED", "PAYMENT_UNRESOLVED", "INVOICE_FAILED", "CANCELLED"})
DEFAULT_TIMEOUT = 180.0  # per flow: the deadline, not a wait (the sandbox's flows take seconds)
# After the shipment is recorded, before it is read again: long enough for a duplicate delivery running
# beside the first to show (a redelivery after a lost acknowledgement waits out the visibility timeout).
DEFAULT_SETTLE = {"sandbox": 3.0, "aws": 10.0}
INVALID_BODY = "invalid body → 400, nothing stored"
PAYMENT = "payment → COMPLETED, retry → same operation"
_EXECUTE_API = re.compile(r"^https://[a-z0-9]+\.execute-api\.[a-z0-9-]+\.amazonaws\.com(?=/|$)")


class Unreachable(OpsError):
    """The stage cannot be reached (no credentials, no such stacks, the endpoint is down): exit 2."""


class CheckFailed(Exception):
    """A check's reason for failing, raised from inside it."""


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'PASS' if self.ok else 'FAIL'}  {self.name}: {self.detail}"


# -- the stage, from its stacks' outputs ---------------------------------------------------------------------


@dataclass(frozen=True)
class Deployed:
    """The stage's stacks as DescribeStacks answered them (by service: ``payments``)."""

    stage: str
    region: str
    stacks: Mapping[str, Mapping[str, Any]]
    missing: tuple[str, ...] = ()  # services whose stack does not exist
    caller: str = ""  # whose credentials (STS GetCallerIdentity)

    def stack_name(self, service: str) -> str:
        return f"relay-{self.stage}-{service}"

    def outputs(self, service: str) -> dict[str, str]:
        stack = self.stacks.get(service) or {}
        return {str(o["OutputKey"]): str(o.get("OutputValue", "")) for o in stack.get("Outputs", [])}

    def output(self, service: str, key: str) -> str:
        value = self.outputs(service).get(key)
        if value is None:
            if service in self.missing:
                raise CheckFailed(f"stack {self.stack_name(service)} does not exist")
            raise CheckFailed(
                f"{self.stack_name(service)} has no output {key} (deployed before the smoke suite needed "
                f"it?): make deploy STAGE={self.stage}"
            )
        return value

    def missing_outputs(self) -> list[str]:
        return [
            f"{self.stack_name(service)}.{key}"
            for service, keys in OUTPUTS.items()
            if service not in self.missing
            for key in keys
            if key not in self.outputs(service)
        ]


def discover(app: App) -> Deployed:
    """DescribeStacks of the stage's six stacks. Raises ``Unreachable`` with what to do when the
    credentials, the region, the endpoint or every stack is missing."""
    from botocore.exceptions import ClientError

    where = f"the endpoint {app.endpoint_url}" if app.endpoint_url else "AWS"
    with _reaching(app):
        region = app.effective_region
        cfn = app.client("cloudformation", max_attempts=2)
        caller = str(app.client("sts", max_attempts=2).get_caller_identity()["Arn"])
        stacks: dict[str, Mapping[str, Any]] = {}
        missing: list[str] = []
        for service in STACKS:
            name = f"relay-{app.stage}-{service}"
            try:
                (stack,) = cfn.describe_stacks(StackName=name)["Stacks"]
            except ClientError as exc:
                error = exc.response.get("Error", {})
                if error.get("Code") == "ValidationError" and "does not exist" in str(error.get("Message")):
                    missing.append(service)
                    continue
                raise
            stacks[service] = stack
    if not stacks:
        names = ", ".join(f"relay-{app.stage}-{s}" for s in STACKS)
        raise Unreachable(
            f"no Relay stage {app.stage!r} in {region} at {where}: none of its stacks ({names}) exists. "
            + (
                f"Deploy it (make deploy STAGE={app.stage}), or check the region (--region, AWS_REGION) and "
                "the account your credentials are for (aws sts get-caller-identity)."
                if not app.is_local
                else "The sandbox there provisioned another stage: give its --stage, or STAGE=local."
            )
        )
    return Deployed(stage=app.stage, region=region, stacks=stacks, missing=tuple(missing), caller=caller)


def sandbox_stage(app: App) -> str:
    """The stage whose stacks the sandbox at ``app.endpoint_url`` provisioned (``relay-<stage>-core``)."""
    with _reaching(app):
        stacks = app.client("cloudformation", max_attempts=2).describe_stacks().get("Stacks", [])
    stages = sorted(
        {m.group(1) for s in stacks if (m := re.fullmatch(r"relay-(.+)-core", str(s.get("StackName", ""))))}
    )
    if len(stages) != 1:
        found = ", ".join(stages) or "none"
        raise Unreachable(
            f"the sandbox at {app.endpoint_url} describes {len(stages)} Relay stages ({found}); give --stage"
        )
    return stages[0]


@contextmanager
def _reaching(app: App) -> Iterator[None]:
    """Turn what stops the first calls (credentials, region, endpoint, refusals) into one paragraph."""
    from botocore.exceptions import (
        ClientError,
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
    )

    target = f"the sandbox at {app.endpoint_url}" if app.is_local else (app.endpoint_url or "AWS")
    try:
        yield
    except NoCredentialsError:
        raise Unreachable(
            f"cannot reach stage {app.stage!r}: no AWS credentials. The suite calls with the caller's "
            "credentials (boto3's default chain: AWS_PROFILE, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, SSO, "
            "an instance or task role); give it credentials for the account the stage is deployed to, or "
            "run it against the sandbox: make smoke STAGE=local."
        ) from None
    except NoRegionError:
        raise Unreachable(
            f"cannot reach stage {app.stage!r}: no AWS region. Give --region, or set AWS_REGION (or "
            "AWS_DEFAULT_REGION, or a profile's region) to the region the stage is deployed in."
        ) from None
    except (EndpointConnectionError, ConnectTimeoutError) as exc:
        raise Unreachable(
            f"cannot reach stage {app.stage!r}: {target} does not answer ({exc}). "
            + (
                "Is the sandbox running (make local)? STAGE=local starts one when none runs."
                if app.is_local
                else "Check the network and the region."
            )
        ) from None
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise Unreachable(
            f"cannot reach stage {app.stage!r}: {target} refused {exc.operation_name} "
            f"({error.get('Code')}: {error.get('Message')}). The suite needs credentials that may call "
            "cloudformation:DescribeStacks (and the reads of `python -m ops doctor`) in that account: "
            "refresh or change them (aws sts get-caller-identity says whose they are)."
        ) from None


# -- signed HTTP ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def brief(self, limit: int = 200) -> str:
        text = self.body.decode("utf-8", errors="replace").strip()
        return f"{self.status} {text[:limit]}{'…' if len(text) > limit else ''}"


class SignedHttp:
    """HTTP calls SigV4-signed for ``execute-api`` with the caller's credentials, as API Gateway's AWS_IAM
    routes require: botocore's ``SigV4Auth`` over the exact request sent (method, path, query, headers,
    payload). ``route`` maps a URL before it is signed and sent (the sandbox's one local port)."""

    def __init__(
        self,
        credentials: Any,
        region: str,
        *,
        route: Callable[[str], str] | None = None,
        timeout: int = 30,
    ) -> None:
        from botocore.httpsession import URLLib3Session

        self.credentials = credentials
        self.region = region
        self.route = route or (lambda url: url)
        self._session = URLLib3Session(timeout=timeout)

    def call(
        self, method: str, url: str, *, body: Any = None, headers: Mapping[str, str] | None = None
    ) -> Answer:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        data = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        sent = {"Accept": "application/json", **({"Content-Type": "application/json"} if data else {})}
        request = AWSRequest(
            method=method, url=self.route(url), data=data, headers={**sent, **(headers or {})}
        )
        # Frozen per request: refreshable credentials (SSO, an assumed role) renew themselves.
        SigV4Auth(self.credentials.get_frozen_credentials(), "execute-api", self.region).add_auth(request)
        response = self._session.send(request.prepare())
        return Answer(int(response.status_code), dict(response.headers.items()), bytes(response.content))


def sandbox_route(api_url: str) -> Callable[[str], str]:
    """``https://<id>.execute-api.<region>.amazonaws.com/<path>`` → ``<api_url>/<path>``: the sandbox
    serves every HTTP API on one port (their routes are disjoint)."""
    base = api_url.rstrip("/")
    return lambda url: _EXECUTE_API.sub(base, url, count=1)


# -- the target: a stage and how to reach it -----------------------------------------------------------------


@dataclass
class Target:
    app: App
    http: SignedHttp
    sandbox: bool = False  # the local sandbox: its fakes can be asked, its IAM denials read
    fakes: Mapping[str, str] = field(default_factory=dict)  # name -> base URL (state.json "fakes")
    note: str = ""  # how it was reached (printed first)
    log_dir: Path | None = None  # a sandbox started for the run: its logs, removed after a clean run
    keep_logs: bool = False  # set when a check failed: the logs stay for the diagnosis


def _fake_view(base_url: str, view: str) -> Any:
    with urllib.request.urlopen(f"{base_url.rstrip('/')}/_admin/{view}", timeout=10) as response:  # noqa: S310
        return json.loads(response.read())


# -- the suite -----------------------------------------------------------------------------------------------


def run_tag(now: datetime | None = None) -> str:
    """``smoke-<UTC time>-<4 hex>``: what every id and key the run creates starts with."""
    moment = now or datetime.now(UTC)
    return f"smoke-{moment.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(2)}"


class Suite:
    def __init__(
        self,
        target: Target,
        deployed: Deployed,
        *,
        tag: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        settle: float | None = None,
        poll: float | None = None,
    ) -> None:
        self.target = target
        self.app = target.app
        self.http = target.http
        self.deployed = deployed
        self.tag = tag or run_tag()
        self.timeout = timeout
        where = "sandbox" if target.sandbox else "aws"
        self.settle = DEFAULT_SETTLE[where] if settle is None else settle
        self.poll = (0.5 if target.sandbox else 1.0) if poll is None else poll
        self.left: list[str] = []  # what the run leaves behind, for the last line

    # running -----------------------------------------------------------------------------------------

    def run(self, only: Sequence[str] = CHECKS, out: Callable[[str], None] = print) -> list[Check]:
        """Every check in ``only``, each line printed as soon as it is known: the two flows (payments,
        orders) run in the background while the quick checks print."""
        wanted = [c for c in CHECKS if c in only and (c != "iam" or self.target.sandbox)]
        denials_before = self._denials() if "iam" in wanted else 0
        # Clients are made here, not in the flows' threads: creating boto3 clients is not thread-safe.
        if "orders" in wanted:
            self.app.client("dynamodb")
        results: list[Check] = []

        def emit(checks: Sequence[Check]) -> None:
            for check in checks:
                results.append(check)
                out(check.line())

        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="smoke") as pool:
            flows: dict[str, Future[list[Check]]] = {}
            if "payments" in wanted:
                names = (INVALID_BODY, PAYMENT)
                flows["payments"] = pool.submit(self._guarded, names, self.payment_flow)
            if "orders" in wanted:
                flows["orders"] = pool.submit(
                    self._guarded, "order placed → paid → shipped once", self.order_flow
                )
            quick: dict[str, tuple[str, Callable[[], list[Check]]]] = {
                "stacks": ("stacks", self.stacks),
                "scores": ("scores API without its key → 401", self.scores_without_key),
                "queues": ("every queue has its DLQ and an alarm", self.queues),
                "schedule": ("hourly schedule enabled", self.hourly_schedule),
                "doctor": ("python -m ops doctor clean", self.doctor),
            }
            for name in wanted:
                if name in quick:
                    label, check = quick[name]
                    emit(self._guarded(label, check))
            for future in flows.values():
                emit(future.result())
        if "iam" in wanted:
            emit(self._guarded("no IAM denials (sandbox)", lambda: [self.iam_denials(denials_before)]))
        return results

    def _guarded(self, names: str | tuple[str, ...], check: Callable[[], list[Check]]) -> list[Check]:
        """The check's results; its failure (``CheckFailed``, or anything it raised) is a FAIL line for
        each of the checks it stands for."""
        try:
            return check()
        except CheckFailed as exc:
            reason = str(exc)
        except Exception as exc:  # a check that crashes fails; the others still run
            reason = f"{type(exc).__name__}: {exc}"
        return [Check(name, False, reason) for name in ((names,) if isinstance(names, str) else names)]

    def _wait(self, what: str, probe: Callable[[], Any], *, deadline: float) -> Any:
        last: Any = None
        while True:
            value = probe()
            if value:
                return value
            last = value
            if time.monotonic() >= deadline:
                raise CheckFailed(f"{what}: not within {self.timeout:.0f} s (last seen: {last!r})")
            time.sleep(self.poll)

    # checks --------------------------------------------------------------------------------------------

    def stacks(self) -> list[Check]:
        deployed = self.deployed
        statuses = {s: str(stack.get("StackStatus", "?")) for s, stack in deployed.stacks.items()}
        problems = [f"{deployed.stack_name(s)} does not exist" for s in deployed.missing]
        problems += [
            f"{deployed.stack_name(s)} is {status}"
            for s, status in statuses.items()
            if status not in COMPLETE
        ]
        missing = deployed.missing_outputs()
        if missing:
            problems.append(f"outputs missing: {', '.join(missing)} (make deploy STAGE={deployed.stage})")
        if problems:
            return [Check("stacks", False, "; ".join(problems))]
        counts = ", ".join(f"{n} {status}" for status, n in sorted(Counter(statuses.values()).items()))
        keys = sum(len(keys) for keys in OUTPUTS.values())
        return [
            Check(
                "stacks",
                True,
                f"{len(statuses)} stacks of relay-{deployed.stage} ({counts}); {keys} outputs read",
            )
        ]

    def scores_without_key(self) -> list[Check]:
        url = self.deployed.output("scores", "ScoresApiUrl") + "/score-snapshots"
        answer = self.http.call("POST", url, body={"snapshotHour": _hour_now()})
        ok = answer.status == 401
        detail = f"POST /score-snapshots without x-api-key: {answer.brief()}"
        return [Check("scores API without its key → 401", ok, detail if ok else f"{detail} (expected 401)")]

    def hourly_schedule(self) -> list[Check]:
        name = self.deployed.output("scores", "HourlyScheduleName")
        schedule = self.app.client("scheduler").get_schedule(Name=name)
        state = str(schedule.get("State"))
        detail = (
            f"{name} {state}, {schedule.get('ScheduleExpression')} "
            f"{schedule.get('ScheduleExpressionTimezone') or 'UTC'}"
        )
        if state != "ENABLED":
            detail += f": no snapshot is taken while it is {state} (aws scheduler update-schedule … --state)"
        return [Check("hourly schedule enabled", state == "ENABLED", detail)]

    def queues(self) -> list[Check]:
        name = "every queue has its DLQ and an alarm"
        queues = self.app.queues()
        alarms = self.app.alarms()
        by_name = {q.name: q for q in queues}
        named: dict[str, str] = {}  # queue -> the stack whose output names it
        problems: list[str] = []
        for service, keys in OUTPUTS.items():
            if "WorkQueueNames" not in keys or service in self.deployed.missing:
                continue  # (a missing stack is the stacks check's failure)
            try:
                value = self.deployed.output(service, "WorkQueueNames")
            except CheckFailed as exc:
                problems.append(str(exc))
                continue
            for queue_name in filter(None, value.split(",")):
                named[queue_name] = self.deployed.stack_name(service)
        problems += [
            f"{q} (named by {stack}'s outputs) does not exist"
            for q, stack in named.items()
            if q not in by_name
        ]
        work = [q for q in queues if not q.is_dlq]
        redrive_targets = {q.dlq.name for q in work if q.dlq is not None}
        for queue in work:
            if queue.dlq is None:
                why = (
                    f"its DLQ {queue.dlq_arn.rsplit(':', 1)[-1]} does not exist"
                    if queue.dlq_arn
                    else "no DLQ"
                )
                problems.append(f"{queue.short}: {why}")
            elif not _depth_alarm(alarms, queue.dlq):
                problems.append(f"{queue.dlq.short}: no alarm on its depth")
            if not any(a.dimensions.get("QueueName") == queue.name for a in alarms):
                problems.append(f"{queue.short}: no alarm on it (oldest message age)")
        others = [q for q in queues if q.is_dlq and q.name not in redrive_targets]
        problems += [f"{q.short}: no alarm on its depth" for q in others if not _depth_alarm(alarms, q)]
        if problems:
            shown = "; ".join(problems[:6]) + (f"; and {len(problems) - 6} more" if len(problems) > 6 else "")
            return [Check(name, False, shown)]
        if not work:
            return [Check(name, False, f"no queues named {self.app.prefix}-* were found")]
        declared = (
            " (alarms as cdk.out declares them: the sandbox does not emulate CloudWatch alarms)"
            if any(a.source == DECLARED for a in alarms)
            else ""
        )
        detail = (
            f"{len(work)} work queues ({len(named)} named by the stacks' outputs), each with its DLQ, an "
            f"alarm on it and one on its DLQ; {len(others)} other DLQs (undeliverable, outbox stream, "
            f"schedule and rule targets) alarmed{declared}"
        )
        return [Check(name, True, detail)]

    def doctor(self) -> list[Check]:
        from ops.doctor import Doctor

        checks = Doctor(self.app).run()
        failed = [c for c in checks if not c.ok]
        name = "python -m ops doctor clean"
        if not checks:
            return [
                Check(
                    name, False, f"nothing to check: no subscriptions or consumers named {self.app.prefix}-*"
                )
            ]
        if failed:
            shown = "; ".join(f"{c.subject}: {c.name} ({c.detail})" for c in failed[:3])
            more = f"; and {len(failed) - 3} more" if len(failed) > 3 else ""
            return [
                Check(
                    name,
                    False,
                    f"{len(failed)} of {len(checks)} checks FAIL: {shown}{more} — "
                    f"python -m ops doctor --stage {self.app.stage} gives each fix",
                )
            ]
        return [Check(name, True, f"{len(checks)} checks, all PASS")]

    def iam_denials(self, before: int) -> Check:
        from emulator.iam_report import denials

        new = denials(str(self.app.endpoint_url))[before:]
        if not new:
            return Check("no IAM denials (sandbox)", True, "no call was denied during the run")
        shown = "; ".join(f"{d['function']}: {d['action']} on {d['resource']}" for d in new[:3])
        return Check(
            "no IAM denials (sandbox)", False, f"{len(new)} calls denied (AWS would deny them too): {shown}"
        )

    def _denials(self) -> int:
        from emulator.iam_report import denials

        try:
            return len(denials(str(self.app.endpoint_url)))
        except OSError:
            return 0

    # the payments flow ------------------------------------------------------------------------------------

    def payment(self, payment_id: str, **overrides: Any) -> dict[str, Any]:
        body: dict[str, Any] = {
            "paymentId": payment_id,
            "amount": "1.00",
            "currency": "EUR",
            "payer": self.tag,
            "payee": "relay-smoke",
            "details": {"smoke": self.tag},
        }
        body.update(overrides)
        return body

    def payment_flow(self) -> list[Check]:
        """The invalid body (400, nothing stored), then the payment under the same key (COMPLETED, and a
        retry answering the same operation): two lines."""
        url = self.deployed.output("payments", "PaymentsApiUrl")
        key = f"{self.tag}-payment"
        headers = {"Idempotency-Key": key}
        invalid_name, payment_name = INVALID_BODY, PAYMENT
        started = time.monotonic()

        refused = self.http.call(
            "POST",
            f"{url}/payments",
            body=self.payment(f"{self.tag}-invalid", amount="twelve"),
            headers=headers,
        )
        body = self.payment(key)
        accepted = self.http.call("POST", f"{url}/payments", body=body, headers=headers)
        fields = [
            str(f.get("field")) for f in ((refused.json() or {}).get("fields") or []) if isinstance(f, dict)
        ]
        operation_id = str((accepted.json() or {}).get("operationId", "")) if accepted.status == 202 else ""
        if refused.status != 400:
            invalid = Check(
                invalid_name,
                False,
                f"POST /payments with amount 'twelve' answered {refused.brief()} (expected 400)",
            )
        elif accepted.status == 422:
            invalid = Check(
                invalid_name,
                False,
                f"400 ({', '.join(fields)}), but it was stored: a valid body under the same Idempotency-Key "
                f"then answered {accepted.brief()}",
            )
        elif not operation_id:
            invalid = Check(
                invalid_name,
                False,
                f"400, then the valid body under the same key answered {accepted.brief()}",
            )
        else:
            read = self.http.call("GET", f"{url}/operations/{operation_id}")
            fresh = read.status == 200 and (read.json() or {}).get("paymentId") == key
            error = (refused.json() or {}).get("error", "")
            named = ", ".join(fields) or "none named"
            invalid = Check(
                invalid_name,
                fresh,
                f"400 {error} (fields: {named}); nothing stored: the same Idempotency-Key then accepted "
                f"fresh (202, operation {operation_id} of {key})"
                if fresh
                else f"400, then the same key answered operation {operation_id}, which reads {read.brief()}",
            )
        if not operation_id:
            return [
                invalid,
                Check(payment_name, False, f"POST /payments answered {accepted.brief()}{_hint(accepted)}"),
            ]
        self.left.append(f"payment operation {operation_id}")

        retry = self.http.call("POST", f"{url}/payments", body=body, headers=headers)
        same = retry.status == 202 and (retry.json() or {}).get("operationId") == operation_id
        view = self._operation_terminal(url, operation_id, deadline=started + self.timeout)
        took = time.monotonic() - started
        status = str(view.get("status"))
        problems = []
        if status != "COMPLETED":
            why = view.get("error") or {}
            problems.append(
                f"operation {operation_id} ended {status}"
                + (f" ({why.get('code')}: {why.get('message')})" if why else "")
                + f"; python -m ops operation {operation_id} --stage {self.app.stage}"
            )
        if not same:
            problems.append(
                f"the retry under the same Idempotency-Key answered {retry.brief()}, not operation "
                f"{operation_id}"
            )
        if problems:
            return [invalid, Check(payment_name, False, "; ".join(problems))]
        steps = " → ".join(f"{s.get('step')} {s.get('status')}" for s in view.get("steps", []))
        detail = (
            f"operation {operation_id} COMPLETED in {took:.1f} s ({steps}); the retry under the same "
            "Idempotency-Key answered the same operation (202)"
        )
        charged = self._fake_count("legacy", "charges-by-operation", operation_id)
        invoiced = self._fake_count("invoice", "invoices-by-operation", operation_id)
        if charged is not None and invoiced is not None:
            detail += (
                f"; the sandbox's legacy system charged it {charged}×, its invoice API invoiced {invoiced}×"
            )
            if (charged, invoiced) != (1, 1):
                return [invalid, Check(payment_name, False, detail + " (expected once each)")]
        return [invalid, Check(payment_name, True, detail)]

    def _operation_terminal(self, url: str, operation_id: str, *, deadline: float) -> dict[str, Any]:
        def probe() -> dict[str, Any] | None:
            answer = self.http.call("GET", f"{url}/operations/{operation_id}")
            view = answer.json() if answer.status == 200 else None
            if isinstance(view, dict) and view.get("status") in PAYMENT_TERMINAL:
                return view
            return None

        try:
            result: dict[str, Any] = self._wait(
                f"operation {operation_id} terminal", probe, deadline=deadline
            )
        except CheckFailed:
            answer = self.http.call("GET", f"{url}/operations/{operation_id}")
            raise CheckFailed(
                f"operation {operation_id} not terminal after {self.timeout:.0f} s: {answer.brief()}; "
                f"python -m ops operation {operation_id} --stage {self.app.stage}"
            ) from None
        return result

    def _fake_count(self, fake: str, view: str, key: str) -> int | None:
        base = self.target.fakes.get(fake)
        if not base:
            return None
        try:
            return int(_fake_view(base, view).get(key, 0))
        except (OSError, ValueError, AttributeError):
            return None

    # the orders flow ----------------------------------------------------------------------------------------

    def order_flow(self) -> list[Check]:
        name = "order placed → paid → shipped once"
        orders_url = self.deployed.output("orders", "OrdersApiUrl")
        payments_url = self.deployed.output("payments", "PaymentsApiUrl")
        table = self.deployed.output("orders", "InventoryTableName")
        ddb = self.app.client("dynamodb")
        sku = f"{self.tag}-sku"
        started = time.monotonic()
        deadline = started + self.timeout
        order: dict[str, Any] = {}
        from ops.seed_stock import seed_stock

        seed_stock({sku: 1}, table=table, ddb_client=ddb)
        try:
            placed = self.http.call(
                "POST",
                f"{orders_url}/orders",
                body={"customerId": self.tag, "items": [{"sku": sku, "quantity": 1}], "currency": "EUR"},
                headers={"Idempotency-Key": f"{self.tag}-order"},
            )
            order_id = str((placed.json() or {}).get("orderId", "")) if placed.status == 201 else ""
            if not order_id:
                raise CheckFailed(f"POST /orders answered {placed.brief()}{_hint(placed)}")
            self.left.append(f"order {order_id} (customer {self.tag})")

            def read() -> dict[str, Any]:
                answer = self.http.call("GET", f"{orders_url}/orders/{order_id}")
                if answer.status != 200:
                    raise CheckFailed(f"GET /orders/{order_id} answered {answer.brief()}")
                view: dict[str, Any] = answer.json()
                return view

            def reaches(*statuses: str) -> Callable[[], dict[str, Any] | None]:
                def probe() -> dict[str, Any] | None:
                    nonlocal order
                    order = read()
                    if order.get("status") in ("REJECTED", "CANCELLED") and order["status"] not in statuses:
                        why = order.get("rejection") or order.get("cancellation")
                        raise CheckFailed(f"order {order_id} became {order['status']}: {why}")
                    return order if order.get("status") in statuses else None

                return probe

            self._wait(f"order {order_id} reserved", reaches("RESERVED", "PAID"), deadline=deadline)
            paying = self.http.call(
                "POST",
                f"{payments_url}/payments",
                body=self.payment(f"{self.tag}-order-payment", orderId=order_id),
                headers={"Idempotency-Key": f"{self.tag}-order-payment"},
            )
            operation_id = str((paying.json() or {}).get("operationId", "")) if paying.status == 202 else ""
            if not operation_id:
                raise CheckFailed(f"paying order {order_id}: POST /payments answered {paying.brief()}")
            self.left.append(f"payment operation {operation_id}")
            self._wait(f"order {order_id} paid (payment {operation_id})", reaches("PAID"), deadline=deadline)

            def shipped() -> dict[str, Any] | None:
                current = reaches("PAID")()
                shipment: dict[str, Any] | None = current.get("shipment") if current else None
                return shipment

            shipment = self._wait(f"order {order_id}'s shipment recorded", shipped, deadline=deadline)
            took = time.monotonic() - started
            if shipment.get("status") != "REQUESTED":
                raise CheckFailed(
                    f"order {order_id} PAID, but the shipping API {shipment.get('status')} its shipment: "
                    f"{shipment.get('reason')}; python -m ops order {order_id} --stage {self.app.stage}"
                )
            time.sleep(self.settle)
            later = read()
            paid_entries = [h for h in later.get("history", []) if h.get("status") == "PAID"]
            if later.get("shipment") != shipment or len(paid_entries) != 1:
                raise CheckFailed(
                    f"order {order_id}'s record changed after it shipped: shipment {shipment} → "
                    f"{later.get('shipment')}, PAID {len(paid_entries)}× in its history"
                )
            history = " → ".join(str(h.get("status")) for h in later.get("history", []))
            detail = (
                f"order {order_id} {history} (payment {operation_id}), shipment {shipment.get('shipmentId')} "
                f"REQUESTED in {took:.1f} s and recorded once (unchanged {self.settle:.0f} s later)"
            )
            count = self._fake_count("shipping", "shipments-by-order", order_id)
            if count is None:
                detail += (
                    "; the shipping API's own count is not visible from outside on AWS: what is checked is "
                    "that the order records one shipment"
                )
            elif count != 1:
                raise CheckFailed(
                    f"{detail}, but the sandbox's shipping API created {count} shipments for it"
                )
            else:
                detail += "; the sandbox's shipping API created exactly 1 shipment for it"
            return [Check(name, True, detail)]
        finally:
            self._remove_stock(ddb, table, sku, order)

    def _remove_stock(self, ddb: Any, table: str, sku: str, order: Mapping[str, Any]) -> None:
        """Delete the seeded stock item once nothing can move it again: no order was placed, or it is
        PAID (its reservation is final) or REJECTED (it took nothing). An order still holding its
        reservation keeps the item (a cancellation would release stock into it)."""
        if order and order.get("status") not in ("PAID", "REJECTED"):
            self.left.append(
                f"the stock item of SKU {sku} (order {order.get('orderId')} is {order.get('status')})"
            )
            return
        try:
            ddb.delete_item(
                TableName=table,
                Key={"pk": {"S": f"SKU#{sku}"}, "sk": {"S": "STOCK"}},
                ConditionExpression="attribute_exists(pk)",
            )
        except Exception as exc:  # the result stands; say what is left
            self.left.append(f"the stock item of SKU {sku} (delete failed: {exc})")


def _depth_alarm(alarms: Sequence[AlarmInfo], queue: QueueInfo) -> bool:
    from ops.doctor import _watches_depth

    return any(_watches_depth(a, queue.name) for a in alarms)


def _hour_now() -> str:
    return datetime.now(UTC).replace(minute=0, second=0, microsecond=0).isoformat().replace("+00:00", "Z")


def _hint(answer: Answer) -> str:
    if answer.status == 403:
        return " (AWS_IAM route: the caller's credentials need execute-api:Invoke on the API)"
    return ""


# -- reaching the stage: AWS, a running sandbox, or one started for the run ----------------------------------


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running_sandbox(state_file: Path = SANDBOX_STATE) -> dict[str, Any] | None:
    """The state of the sandbox ``make local`` runs (``.sandbox/state.json``), when its process is alive."""
    try:
        state = json.loads(state_file.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or not _alive(state.get("pid")) or not state.get("endpoint"):
        return None
    return state


def sandbox_target(state: Mapping[str, Any], *, stage: str | None, region: str | None, note: str) -> Target:
    """The sandbox a state (``Sandbox.state()``) describes: its emulator, its one HTTP API port, its fakes."""
    endpoint = str(state["endpoint"])
    api_urls = state.get("apiUrls") or []
    if not api_urls:
        raise Unreachable(f"the sandbox at {endpoint} serves no HTTP API (its state names none)")
    templates = Path(str(state.get("cdkOut") or DEFAULT_TEMPLATES))
    app = App(stage=stage or LOCAL_STAGE, region=region, endpoint_url=endpoint, templates=templates)
    if app.stage == LOCAL_STAGE:
        app = App(stage=sandbox_stage(app), region=region, endpoint_url=endpoint, templates=templates)
    http = SignedHttp(
        _sandbox_client(state, app), app.effective_region, route=sandbox_route(str(api_urls[0]))
    )
    fakes = {str(k): str(v) for k, v in (state.get("fakes") or {}).items() if v}
    return Target(app=app, http=http, sandbox=True, fakes=fakes, note=note)


# Starts a sandbox for the run (``local.smoke.started_sandbox``): given the log folder and the assembly,
# yields the sandbox's state. ``python -m local smoke`` passes it; ops itself never starts a sandbox.
SandboxStarter = Callable[[Path, Path], AbstractContextManager[dict[str, Any]]]


@contextmanager
def reach(args: argparse.Namespace, start_sandbox: SandboxStarter | None = None) -> Iterator[Target]:
    """The target the command line names: AWS (``--stage``), the sandbox (``--stage local``: the running
    one, else one ``start_sandbox`` starts for the run), a running sandbox (``--local``), or an emulator
    (``--endpoint-url``, with ``--api-url`` for its HTTP API)."""
    stage: str = args.stage
    state_file = Path(args.sandbox_state) if args.sandbox_state else SANDBOX_STATE
    if args.local and args.endpoint_url:
        raise OpsError("--local and --endpoint-url name two places; give one")
    if args.endpoint_url:
        if not is_loopback(args.endpoint_url):
            app = App(stage=stage, region=args.region, endpoint_url=args.endpoint_url)
            http = SignedHttp(_credentials(app), app.effective_region, route=None)
            yield Target(app=app, http=http, note=f"endpoint {args.endpoint_url}")
            return
        state = running_sandbox(state_file)
        if state is not None and state.get("endpoint") == args.endpoint_url.rstrip("/"):
            yield sandbox_target(
                state, stage=stage, region=args.region, note=f"the sandbox at {args.endpoint_url}"
            )
            return
        if not args.api_url:
            raise OpsError(
                f"{args.endpoint_url} is not the sandbox {state_file} describes: give its HTTP API with "
                "--api-url"
            )
        state = {"endpoint": args.endpoint_url.rstrip("/"), "apiUrls": [args.api_url]}
        yield sandbox_target(
            state, stage=stage, region=args.region, note=f"the emulator at {args.endpoint_url}"
        )
        return
    if args.local or stage == LOCAL_STAGE:
        state = running_sandbox(state_file)
        if state is not None:
            yield sandbox_target(
                state,
                stage=stage,
                region=args.region,
                note=f"the running sandbox ({state_file.name}: pid {state['pid']})",
            )
            return
        if args.local or start_sandbox is None:
            raise Unreachable(
                f"no sandbox is running ({state_file} names no live one): start one with make local, or run "
                "make smoke STAGE=local, which starts one for the run"
            )
        log_dir = Path(tempfile.mkdtemp(prefix="relay-smoke-"))
        print(
            f"smoke: no sandbox is running; starting one on free ports (log: {log_dir}/sandbox.log)…",
            flush=True,
        )
        began = time.monotonic()
        with start_sandbox(log_dir, Path(args.cdk_out) if args.cdk_out else DEFAULT_TEMPLATES) as state:
            note = (
                f"a sandbox started for the run in {time.monotonic() - began:.1f} s (emulator "
                f"{state['endpoint']}, API {state['apiUrls'][0]}; stopped at the end)"
            )
            target = sandbox_target(state, stage=stage, region=args.region, note=note)
            target.log_dir = log_dir
            yield target
        if not target.keep_logs:
            shutil.rmtree(log_dir, ignore_errors=True)
        return
    app = App(stage=stage, region=args.region, endpoint_url=None)
    yield Target(app=app, http=SignedHttp(_credentials(app), _region(app)), note="AWS")


def _sandbox_client(state: Mapping[str, Any], app: App) -> Any:
    """The sandbox's allowed caller (``relay-local-client``, emulator/callers.py), as a client signs on AWS
    with its own identity; a bare emulator (``--endpoint-url`` with ``--api-url``) has none: the
    environment's credentials."""
    from botocore.credentials import Credentials

    client = (state.get("callers") or {}).get("relay-local-client")
    if not client:
        return app.credentials()
    return Credentials(str(client["accessKeyId"]), str(client["secretAccessKey"]))


def _credentials(app: App) -> Any:
    with _reaching(app):
        return app.credentials()


def _region(app: App) -> str:
    with _reaching(app):
        return app.effective_region


# -- the command line ----------------------------------------------------------------------------------------


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "smoke",
        help="the black-box suite against a deployed stage (--stage local: the sandbox); exit 0 if all pass",
        description="Check a deployed stage as a user relies on it, from its stacks' outputs and with your "
        "AWS credentials (HTTP calls SigV4-signed): a payment completes and its retry answers the same "
        "operation, an invalid body is refused and stores nothing, an order is paid and shipped once, the "
        "scores API refuses a call without its key, every queue has its DLQ and alarms, the hourly schedule "
        "is enabled, ops doctor is clean. --stage local runs it against the running sandbox (make smoke "
        "STAGE=local starts one when none runs). One line per check; exit 0 all pass, 1 a check failed, "
        "2 the stage cannot be reached.",
    )
    add_connection_arguments(parser)
    parser.add_argument(
        "--api-url",
        help="with --endpoint-url of an emulator: the base URL of its HTTP API (all routes on one port)",
    )
    parser.add_argument(
        "--sandbox-state",
        help="the running sandbox's state file (default .sandbox/state.json, what make local writes)",
    )
    parser.add_argument(
        "--cdk-out",
        help="the assembly a sandbox started for the run provisions (default cdk.out; synthesized if stale)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help=f"seconds each flow (payment, order) may take before it fails (default {DEFAULT_TIMEOUT:.0f})",
    )
    parser.add_argument(
        "--only",
        type=lambda text: [c.strip() for c in text.split(",") if c.strip()],
        default=list(CHECKS),
        help=f"run only these checks, comma-separated: {', '.join(CHECKS)}",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, start_sandbox: SandboxStarter | None = None) -> int:
    unknown = [c for c in args.only if c not in CHECKS]
    if unknown:
        raise OpsError(f"--only {','.join(unknown)}: no such check; the checks are {', '.join(CHECKS)}")
    began = time.monotonic()
    with reach(args, start_sandbox) as target:
        deployed = discover(target.app)
        suite = Suite(target, deployed, timeout=args.timeout)
        print(
            f"smoke: {target.app.prefix} in {deployed.region}, {target.note}, as {deployed.caller}",
            flush=True,
        )
        print(
            f"smoke: tag {suite.tag} (every Idempotency-Key, paymentId, customerId and SKU it creates "
            "starts with it)",
            flush=True,
        )
        checks = suite.run(args.only, out=lambda line: print(line, flush=True))
        failed = [c for c in checks if not c.ok]
        target.keep_logs = bool(failed)
    left = "; ".join(suite.left) or "nothing"
    logs = f"; the sandbox's logs: {target.log_dir}" if failed and target.log_dir else ""
    print(
        f"smoke: {len(checks)} checks, {len(checks) - len(failed)} PASS, {len(failed)} FAIL in "
        f"{time.monotonic() - began:.1f} s; left behind (tagged {suite.tag}): {left}{logs}"
    )
    return 1 if failed else 0


if __name__ == "__main__":  # `python -m ops smoke` is the entry point; this is a convenience
    from ops.__main__ import main

    sys.exit(main(["smoke", *sys.argv[1:]]))
