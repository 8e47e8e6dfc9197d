"""EventBridge Scheduler → event bus → rule → API destination, and Scheduler → SQS, run by the sandbox.

moto stores schedules, rules, connections and API destinations (the provisioner creates them there,
so the AWS CLI sees them) but never fires a schedule and never calls an API destination. This module
does both, from the templates' own properties:

* **Scheduler hop.** A schedule fires on the sandbox's clock (``SchedulerClock``) or on demand
  (``fire_schedule``, ``python -m local fire-schedule``). Its ``Input`` gets the context attributes
  substituted (``<aws.scheduler.scheduled-time>`` is the scheduled time in ISO-8601 UTC;
  ``execution-id``, ``schedule-arn`` and ``attempt-number`` too) and goes to its templated target
  with the schedule's own execution role, so IAM applies as on AWS:

  - an **event bus** (``arn:aws:events:...:event-bus/<name>``): ``PutEvents`` with the result as the
    detail and ``EventBridgeParameters``' source and detail type; the event then goes through the
    bus's rules (below). ``Firing.event_id`` is the EventId.
  - an **SQS queue** (``arn:aws:sqs:...``, what CDK's ``SqsSendMessage`` synthesizes): ``SendMessage``
    with the result as the message body (and ``SqsParameters.MessageGroupId`` for a FIFO queue). No
    rule sees it. ``Firing.message_id`` is the MessageId.

  A failed call is retried per the schedule's ``RetryPolicy`` (``MaximumRetryAttempts``,
  ``MaximumEventAgeInSeconds``) and then sent to the schedule's DLQ with Scheduler's message
  attributes (ERROR_CODE, ERROR_MESSAGE, EXECUTION_ID, SCHEDULE_ARN, TARGET_ARN). ERROR_CODE is the
  emulator's error code (``AccessDenied``, ``AWS.SimpleQueueService.NonExistentQueue``, ...).
* **Bus → rule.** Every enabled rule on that bus whose ``EventPattern`` matches the event gets it
  (``emulator.event_patterns``: EventBridge's content filters, the same matcher the emulator uses). A
  rule's SQS targets are served inside the emulator (``emulator.bus_delivery``), for every event put on
  the bus, the functions' included; this module calls the API-destination targets.
* **Rule → API destination.** The target's ``InputPath`` selects the body; the request carries the
  Connection's API-key header (read from the emulator at each attempt, so
  ``aws events update-connection`` takes effect at once) and has EventBridge's 5-second timeout. The
  API destination's ``InvocationRateLimitPerSecond`` is honoured. An endpoint on one of the app's own
  HTTP APIs (``https://<api-id>.execute-api.<region>.amazonaws.com/...``) is mapped to the local HTTP
  API, same path.

Retries follow EventBridge's documented rule for API destinations
(https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-api-destinations.html, "API destination
error codes"): 401, 407, 409, 429 and every 5xx are retried, as are timeouts and connection errors;
any other 4xx (403 included) and 1xx/3xx are NOT retried and go straight to the DLQ. Retries stop at
the target's ``MaximumRetryAttempts`` or when the event is older than ``MaximumEventAgeInSeconds``;
the event then goes to the target's DLQ with the message attributes EventBridge documents
(RULE_ARN, TARGET_ARN, ERROR_CODE, ERROR_MESSAGE) plus EXHAUSTED_RETRY_CONDITION and
RETRY_ATTEMPTS. AWS backs off exponentially with jitter over up to 24 h without publishing the
delays; locally the backoff is ``backoff_delay`` (0.25 s doubling to 1 s on the fast clock, 1 s
doubling to 60 s with ``--production-clock``). The ERROR_CODE strings are the sandbox's own
(``HTTP_401``, ``TIMEOUT``, ``CONNECTION_ERROR``); AWS does not document the ones it uses.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from emulator.event_patterns import InvalidPattern, pattern_matches
from emulator.iam import access_key_for
from emulator.iam_report import service_may
from emulator.provision import (
    DYNAMIC_REFERENCE,
    ApiDestinationSpec,
    HttpApiSpec,
    RuleSpec,
    ScheduleSpec,
    TargetKind,
    TargetSpec,
    Topology,
    resolve_dynamic_reference,
)
from emulator.server import ACCOUNT_ID, REGION, client

API_DESTINATION_TIMEOUT_SECONDS = 5.0
# EventBridge retries these HTTP answers of an API destination; every other non-2xx is final.
RETRIED_STATUSES = frozenset({401, 407, 409, 429})
USER_AGENT = "Amazon/EventBridge/ApiDestinations"
# The accelerated clock replays this many past hours before it catches up with real time: the scores
# API refuses an hour more than 1 h ahead (a snapshot of the future), so it cannot run ahead.
BACKFILL_HOURS = 24
# How often the clock looks at real time: a schedule fires at most this late.
TICK_SECONDS = 1.0

Log = Callable[[str], None]


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# Schedule expressions -----------------------------------------------------------------------------


def _field_values(text: str, low: int, high: int) -> set[int] | None:
    """Values of one cron field (``*``, ``5``, ``1,2``, ``1-5``, ``*/15``, ``0/15``); None if unsupported."""
    values: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if base in ("*", "?"):
            start, end = low, high
        elif re.fullmatch(r"\d+-\d+", base):
            start, end = (int(x) for x in base.split("-"))
        elif base.isdigit():
            start = int(base)
            end = high if step_text else start
        else:
            return None
        values.update(range(start, end + 1, step))
    return values


def occurrences(expression: str, timezone: str, start: datetime, end: datetime) -> Iterator[datetime] | None:
    """Fire times in ``(start, end]`` (UTC), or None when the expression is not supported locally.

    Supported: ``rate(N minute|minutes|hour|hours|day|days)``, ``at(yyyy-mm-ddThh:mm:ss)`` and
    ``cron(minutes hours * * ? *)`` whose day, month, weekday and year fields are wildcards.
    """
    tz = ZoneInfo(timezone or "UTC")
    rate = re.fullmatch(r"rate\((\d+) (minute|minutes|hour|hours|day|days)\)", expression)
    if rate:
        unit = {"m": 60, "h": 3600, "d": 86400}[rate.group(2)[0]]
        period = int(rate.group(1)) * unit
        first = int(start.timestamp()) // period * period + period
        return (datetime.fromtimestamp(t, UTC) for t in range(first, int(end.timestamp()) + 1, period))
    at = re.fullmatch(r"at\((\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\)", expression)
    if at:
        moment = datetime.fromisoformat(at.group(1)).replace(tzinfo=tz).astimezone(UTC)
        return iter([moment] if start < moment <= end else [])
    cron = re.fullmatch(r"cron\((\S+) (\S+) (\S+) (\S+) (\S+) (\S+)\)", expression)
    if not cron:
        return None
    minute_text, hour_text, *rest = cron.groups()
    if any(f not in ("*", "?") for f in rest):
        return None
    minutes, hours = _field_values(minute_text, 0, 59), _field_values(hour_text, 0, 23)
    if minutes is None or hours is None:
        return None

    def walk() -> Iterator[datetime]:
        moment = start.astimezone(tz).replace(second=0, microsecond=0) + timedelta(minutes=1)
        while moment.astimezone(UTC) <= end:
            if moment.minute in minutes and moment.hour in hours:
                yield moment.astimezone(UTC)
            moment += timedelta(minutes=1)

    return walk()


def fires_more_than_hourly(spec: ScheduleSpec) -> bool:
    """Whether two occurrences can be less than an hour apart (``rate(5 minutes)``,
    ``cron(0/15 * * * ? *)``): the accelerated clock fires such a schedule on real time only."""
    day = datetime(2026, 1, 5, tzinfo=UTC)  # any day without a DST change
    previous = None
    for moment in occurrences(spec.expression, spec.timezone, day, day + timedelta(days=1)) or []:
        if previous is not None and moment - previous < timedelta(hours=1):
            return True
        previous = moment
    return False


def latest_occurrence(spec: ScheduleSpec, now: datetime) -> datetime:
    """The schedule's most recent fire time at or before ``now`` (``now`` itself if unknown)."""
    found = occurrences(spec.expression, spec.timezone, now - timedelta(days=1), now)
    last = None
    for moment in found or []:
        last = moment
    return last or now.replace(microsecond=0)


# Event patterns -----------------------------------------------------------------------------------


def input_path(event: dict[str, Any], path: str | None) -> Any:
    """The part of the event a target's ``InputPath`` (``$`` or ``$.a.b``) selects."""
    if not path or path == "$":
        return event
    selected: Any = event
    for part in path.removeprefix("$.").split("."):
        selected = selected.get(part) if isinstance(selected, dict) else None
    return selected


def _error_code(exc: Exception) -> str:
    """A failed call's error code as the service answered it (``AccessDenied``), else the exception type."""
    response = getattr(exc, "response", None)
    code = (response or {}).get("Error", {}).get("Code") if isinstance(response, dict) else None
    return str(code) if code else type(exc).__name__


# Outcomes -----------------------------------------------------------------------------------------


@dataclass
class Attempt:
    status: int | None  # HTTP status; None for a timeout or connection error
    error: str = ""
    at: float = field(default_factory=time.time)


@dataclass
class Delivery:
    """What happened to one event at one rule target."""

    rule: str
    target_arn: str
    event_id: str
    attempts: list[Attempt] = field(default_factory=list)
    delivered: bool = False
    dead_lettered: bool = False
    error_code: str = ""
    error_message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "target": self.target_arn,
            "eventId": self.event_id,
            "attempts": [a.status if a.status is not None else a.error for a in self.attempts],
            "delivered": self.delivered,
            "deadLettered": self.dead_lettered,
            "error": f"{self.error_code}: {self.error_message}" if self.error_code else "",
        }


@dataclass
class Firing:
    """One firing of a schedule: the call to its target (PutEvents or SendMessage), and for an event
    bus the rule deliveries of the event it put."""

    schedule: str
    scheduled_time: str
    target_arn: str = ""
    target_kind: TargetKind = "event-bus"
    event_id: str | None = None  # PutEvents' EventId (event-bus target)
    message_id: str | None = None  # SendMessage's MessageId (SQS target)
    error: str = ""
    dead_lettered: bool = False
    deliveries: list[Future[Delivery]] = field(default_factory=list)  # event-bus targets only

    @property
    def sent(self) -> bool:
        """The target accepted it (an EventId or a MessageId came back)."""
        return bool(self.event_id or self.message_id)

    def wait(self, timeout: float = 120.0) -> list[Delivery]:
        return [future.result(timeout=timeout) for future in self.deliveries]

    def to_json(self, wait: float | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schedule": self.schedule,
            "scheduledTime": self.scheduled_time,
            "target": self.target_arn,
            "targetKind": self.target_kind,
            "eventId": self.event_id,
            "messageId": self.message_id,
            "error": self.error,
            "deadLettered": self.dead_lettered,
        }
        if wait is not None:
            out["deliveries"] = [d.to_json() for d in self.wait(wait)]
        return out


# The glue -----------------------------------------------------------------------------------------


class EventBridge:
    """Fires schedules, matches rules, calls API destinations; see the module docstring."""

    def __init__(
        self,
        topology: Topology,
        endpoint: str,
        *,
        apis: list[HttpApiSpec],
        local_api_url: str,
        fast_clock: bool = True,
        log: Log = print,
    ) -> None:
        self.topology = topology
        self.apis = apis
        self.local_api_url = local_api_url
        self.fast_clock = fast_clock
        self.log = log
        self.endpoint = endpoint
        self.events = client("events", endpoint)
        self.sqs = client("sqs", endpoint)
        # Scheduler puts each schedule's event, and dead-letters it, with the schedule's execution role:
        # IAM applies (a role without events:PutEvents on the bus is denied, as on AWS).
        self._as_schedule = {
            spec.name: (
                client("events", endpoint, access_key_id=access_key_for(spec.caller)),
                client("sqs", endpoint, access_key_id=access_key_for(spec.caller)),
            )
            for spec in topology.schedules
            if spec.role_arn
        }
        self.secretsmanager = client("secretsmanager", endpoint)
        self._raw_connections: dict[str, Any] = {}
        # moto answers DescribeConnection with the API key value (AWS does not); botocore drops it
        # while parsing, so the raw answer is kept. The emulator's connection stays the one source.
        self.events.meta.events.register("after-call.events.DescribeConnection", self._keep_raw)
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="eventbridge")
        self._rate_lock = threading.Lock()
        self._next_slot: dict[str, float] = {}
        self._reported: set[str] = set()
        self.deliveries: list[Delivery] = []
        self.firings = 0
        self._closed = threading.Event()

    def _keep_raw(self, http_response: Any, parsed: dict[str, Any], **_: Any) -> None:
        try:
            raw = json.loads(http_response.content)
        except (ValueError, TypeError):
            return
        self._raw_connections[str(raw.get("Name", ""))] = raw

    # Scheduler hop ---------------------------------------------------------------------------

    def schedule(self, name: str | None) -> list[ScheduleSpec]:
        if name is None:
            return [s for s in self.topology.schedules if s.enabled]
        found = [s for s in self.topology.schedules if name in (s.name, s.arn)]
        if not found:
            known = ", ".join(s.name for s in self.topology.schedules) or "none"
            raise KeyError(f"no schedule named {name!r}; the templates declare: {known}")
        return found

    def fire_schedule(
        self, name: str | None = None, scheduled_time: datetime | str | None = None
    ) -> list[Firing]:
        """Fire ``name`` (default: every enabled schedule) as if its time had come.

        ``scheduled_time`` defaults to the schedule's latest occurrence (for an hourly schedule: the
        start of the current hour). Returns when the event is on the bus; ``Firing.wait()`` waits for
        the API destination calls.
        """
        firings = []
        for spec in self.schedule(name):
            if isinstance(scheduled_time, str):
                moment = datetime.fromisoformat(scheduled_time.replace("Z", "+00:00"))
            else:
                moment = scheduled_time or latest_occurrence(spec, datetime.now(UTC))
            firings.append(self._fire(spec, moment))
        return firings

    def _fire(self, spec: ScheduleSpec, moment: datetime) -> Firing:
        self.firings += 1
        execution_id = str(uuid.uuid4())
        firing = Firing(spec.name, iso(moment), spec.target_arn, spec.target_kind)
        payload = (
            spec.input.replace("<aws.scheduler.scheduled-time>", iso(moment))
            .replace("<aws.scheduler.execution-id>", execution_id)
            .replace("<aws.scheduler.schedule-arn>", spec.arn)
        )
        events, sqs = self._as_schedule.get(spec.name, (self.events, self.sqs))
        action = "SendMessage" if spec.target_kind == "sqs" else "PutEvents"
        started = time.time()
        error_code, error, body = "", "", payload
        for attempt in range(spec.retry.maximum_retry_attempts + 1):
            body = payload.replace("<aws.scheduler.attempt-number>", str(attempt + 1))
            try:
                if spec.target_kind == "sqs":
                    self._send_message(sqs, spec, body, firing)
                    return firing
                refused = self._put_event(events, spec, body, moment, firing)
                if refused is None:
                    return firing
                error_code, error = refused
            except Exception as exc:  # the emulator refused or is unreachable: Scheduler retries
                error_code, error = _error_code(exc), str(exc)
            if time.time() - started >= spec.retry.maximum_event_age_seconds or self._closed.is_set():
                break
            time.sleep(self.backoff_delay(attempt + 1))
        firing.error = f"{error_code}: {error}"
        self.log(f"schedule {spec.name}: {action} to {spec.target_name} failed ({firing.error})")
        if spec.dlq_arn:
            # The DLQ gets the last request the target refused (attempt number and all).
            self._dead_letter(
                sqs,
                spec.dlq_arn,
                body,
                {
                    "ERROR_CODE": error_code or "UNKNOWN",
                    "ERROR_MESSAGE": (error or f"{action} failed")[:1000],
                    "EXECUTION_ID": execution_id,
                    "SCHEDULE_ARN": spec.arn,
                    "TARGET_ARN": spec.target_arn,
                },
            )
            firing.dead_lettered = True
        return firing

    def _put_event(
        self, events: Any, spec: ScheduleSpec, detail: str, moment: datetime, firing: Firing
    ) -> tuple[str, str] | None:
        """PutEvents on the target bus, then the bus's rules; the entry's (ErrorCode, ErrorMessage) if
        the bus refused it (PutEvents answers 200 with a failed entry)."""
        bus = spec.target_name
        entry = {
            "Source": spec.source,
            "DetailType": spec.detail_type,
            "Detail": detail,
            "EventBusName": bus,
            "Resources": [spec.arn],
            "Time": moment,
        }
        result = events.put_events(Entries=[entry])["Entries"][0]
        if not result.get("EventId"):
            return str(result.get("ErrorCode")), str(result.get("ErrorMessage"))
        firing.event_id = str(result["EventId"])
        self._route(bus, spec, entry, firing, moment)
        return None

    @staticmethod
    def _send_message(sqs: Any, spec: ScheduleSpec, body: str, firing: Firing) -> None:
        """SendMessage to the target queue (a refusal raises); no rule sees it, SQS is not a bus."""
        params: dict[str, Any] = {"QueueUrl": spec.queue_url, "MessageBody": body}
        if spec.message_group_id:
            # Scheduler requires content-based deduplication on a FIFO target: no deduplication id.
            params["MessageGroupId"] = spec.message_group_id
        firing.message_id = str(sqs.send_message(**params)["MessageId"])

    # Bus → rules -----------------------------------------------------------------------------

    def _route(
        self, bus: str, spec: ScheduleSpec, entry: dict[str, Any], firing: Firing, moment: datetime
    ) -> None:
        assert firing.event_id is not None
        event = {
            "version": "0",
            "id": firing.event_id,
            "detail-type": entry["DetailType"],
            "source": entry["Source"],
            "account": ACCOUNT_ID,
            "time": iso(moment),
            "region": REGION,
            "resources": entry["Resources"],
            "detail": json.loads(entry["Detail"]),
        }
        for rule in self.topology.rules:
            if rule.event_bus != bus or not rule.enabled:
                continue
            try:
                matched = pattern_matches(rule.pattern, event)
            except InvalidPattern as exc:
                self._report_once(f"rule {rule.name}: event pattern refused: {exc}")
                continue
            if not matched:
                continue
            for target in rule.targets:
                if target.arn.startswith("arn:aws:sqs:"):
                    continue  # delivered by the emulator (emulator.bus_delivery), as for any PutEvents
                firing.deliveries.append(self._pool.submit(self._deliver, rule, target, event))

    def _deliver(self, rule: RuleSpec, target: TargetSpec, event: dict[str, Any]) -> Delivery:
        delivery = Delivery(rule.name, target.arn, str(event["id"]))
        destination = self.topology.api_destinations.get(target.arn)
        if destination is None:
            delivery.error_code, delivery.error_message = "UNSUPPORTED_TARGET", "not delivered locally"
            self._report_once(
                f"rule {rule.name}: target {target.arn} is not an API destination; not delivered"
            )
            return delivery
        body = json.dumps(input_path(event, target.input_path)).encode()
        received = time.time()
        exhausted = "MaximumRetryAttempts"
        while True:
            attempt = self._call(destination, body)
            delivery.attempts.append(attempt)
            if attempt.status is not None and 200 <= attempt.status < 300:
                delivery.delivered = True
                break
            if attempt.status is not None:
                delivery.error_code = f"HTTP_{attempt.status}"
                delivery.error_message = (
                    f"API destination {destination.name} answered HTTP {attempt.status}: {attempt.error}"
                )
            else:
                delivery.error_code = "TIMEOUT" if "timed out" in attempt.error else "CONNECTION_ERROR"
                delivery.error_message = f"API destination {destination.name}: {attempt.error}"
            retryable = attempt.status is None or attempt.status in RETRIED_STATUSES or attempt.status >= 500
            if not retryable:
                exhausted = "NonRetryableError"
                break
            retries = len(delivery.attempts) - 1
            if retries >= target.retry.maximum_retry_attempts:
                break
            delay = self.backoff_delay(retries + 1)
            if time.time() + delay - received > target.retry.maximum_event_age_seconds:
                exhausted = "MaximumEventAgeInSeconds"
                break
            if self._closed.wait(delay):
                break
        self.deliveries.append(delivery)
        if not delivery.delivered:
            self.log(
                f"rule {rule.name}: event {delivery.event_id} not delivered after {len(delivery.attempts)} "
                f"attempt(s) ({delivery.error_code})" + (" → DLQ" if target.dlq_arn else " → dropped")
            )
            # EventBridge sends to the rule's DLQ as events.amazonaws.com: the queue policy decides.
            if target.dlq_arn and service_may(
                self.endpoint, "events.amazonaws.com", rule.arn, "sqs:SendMessage", target.dlq_arn
            ):
                self._dead_letter(
                    self.sqs,
                    target.dlq_arn,
                    json.dumps(event),
                    {
                        "RULE_ARN": rule.arn,
                        "TARGET_ARN": target.arn,
                        "ERROR_CODE": delivery.error_code,
                        "ERROR_MESSAGE": delivery.error_message[:1000],
                        "EXHAUSTED_RETRY_CONDITION": exhausted,
                        "RETRY_ATTEMPTS": str(len(delivery.attempts) - 1),
                    },
                )
                delivery.dead_lettered = True
        return delivery

    # Rule target → API destination -----------------------------------------------------------

    def _wait_for_rate_slot(self, destination: ApiDestinationSpec) -> None:
        if not destination.rate_limit_per_second:
            return
        interval = 1.0 / destination.rate_limit_per_second
        with self._rate_lock:
            now = time.monotonic()
            slot = max(now, self._next_slot.get(destination.arn, now))
            self._next_slot[destination.arn] = slot + interval
        if slot > now:
            self._closed.wait(slot - now)

    def api_key_header(self, destination: ApiDestinationSpec) -> tuple[str, str]:
        """The connection's (header, value), read from the emulator now."""
        connection = self.topology.connections.get(destination.connection_arn)
        if connection is None:
            raise RuntimeError(f"connection {destination.connection_arn} is not provisioned")
        self.events.describe_connection(Name=connection.name)
        raw = self._raw_connections.get(connection.name, {})
        params = (raw.get("AuthParameters") or {}).get("ApiKeyAuthParameters") or {}
        name, value = str(params.get("ApiKeyName", "")), str(params.get("ApiKeyValue", ""))
        if "{{resolve:" in value:
            value = DYNAMIC_REFERENCE.sub(lambda m: resolve_dynamic_reference(m, self.secretsmanager), value)
        return name, value

    def local_url(self, endpoint: str) -> str:
        """The endpoint, with one of the app's own HTTP APIs mapped to the local HTTP API."""
        for api in self.apis:
            if endpoint.startswith(api.aws_endpoint):
                return self.local_api_url + endpoint.removeprefix(api.aws_endpoint)
        return endpoint

    def _call(self, destination: ApiDestinationSpec, body: bytes) -> Attempt:
        self._wait_for_rate_slot(destination)
        try:
            header, key = self.api_key_header(destination)
        except Exception as exc:
            return Attempt(None, f"connection unreadable: {exc}")
        headers = {"Content-Type": "application/json; charset=utf-8", "User-Agent": USER_AGENT}
        if header:
            headers[header] = key
        request = urllib.request.Request(
            self.local_url(destination.endpoint),
            data=body if destination.method not in ("GET", "HEAD") else None,
            method=destination.method,
            headers=headers,
        )
        try:
            with urllib.request.urlopen(request, timeout=API_DESTINATION_TIMEOUT_SECONDS) as response:
                return Attempt(int(response.status))
        except urllib.error.HTTPError as exc:
            with exc:
                return Attempt(exc.code, exc.read(300).decode("utf-8", errors="replace"))
        except TimeoutError:
            return Attempt(None, f"timed out after {API_DESTINATION_TIMEOUT_SECONDS:g} s")
        except (urllib.error.URLError, OSError) as exc:
            if "timed out" in str(exc):
                return Attempt(None, f"timed out after {API_DESTINATION_TIMEOUT_SECONDS:g} s")
            return Attempt(None, f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}")

    # helpers ---------------------------------------------------------------------------------

    def backoff_delay(self, retry: int) -> float:
        """Delay before retry number ``retry`` (1-based): exponential, capped, with a little jitter."""
        base, cap = (0.25, 1.0) if self.fast_clock else (1.0, 60.0)
        delay: float = min(base * 2.0 ** (retry - 1), cap)
        return delay * random.uniform(0.8, 1.0)

    def _dead_letter(self, sqs: Any, dlq_arn: str, body: str, attributes: dict[str, str]) -> None:
        name = dlq_arn.rsplit(":", 1)[-1]
        url = self.topology.queues.get(name)
        if url is None:
            self.log(f"DLQ {name} is not provisioned; the event is dropped")
            return
        sqs.send_message(
            QueueUrl=url,
            MessageBody=body,
            MessageAttributes={
                k: {"DataType": "String", "StringValue": v or "-"} for k, v in attributes.items()
            },
        )

    def _report_once(self, message: str) -> None:
        if message not in self._reported:
            self._reported.add(message)
            self.log(message)

    def close(self) -> None:
        self._closed.set()
        self._pool.shutdown(wait=True, cancel_futures=True)


class SchedulerClock:
    """Fires the schedules on time: real time, or ``hour_every`` seconds per hour.

    The accelerated clock starts ``BACKFILL_HOURS`` hours in the past and advances one hour per tick,
    firing every occurrence in that hour (an hourly schedule: once, scheduled-time = that hour); when
    it has caught up with real time it continues at real speed, because the app rightly refuses
    snapshots of hours that have not started yet.

    A schedule that fires more than once an hour (``rate(5 minutes)``, ``cron(0/15 * * * ? *)``;
    ``fires_more_than_hourly``) is NOT replayed: the backfill would fire a 5-minute one 12 times per
    virtual hour, 288 times in a few seconds, which is a flood, not a schedule. It fires on real time
    only, from the moment the clock starts, while the other schedules replay. On the real-time clock
    (no ``hour_every``) every schedule, sub-hourly or not, fires on real time, within ``TICK_SECONDS``.
    """

    def __init__(self, bridge: EventBridge, *, hour_every: float | None, log: Log = print) -> None:
        self.bridge = bridge
        self.hour_every = hour_every
        self.log = log
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        now = datetime.now(UTC)
        hour = now.replace(minute=0, second=0, microsecond=0)
        self.virtual_now = hour - timedelta(hours=BACKFILL_HOURS) if hour_every else now
        self.real_now = now  # how far the real-time-only schedules have been fired
        self.real_time_only = (
            {s.name for s in bridge.topology.schedules if fires_more_than_hourly(s)} if hour_every else set()
        )
        self.fired: list[Firing] = []

    def describe(self) -> str:
        if self.hour_every:
            text = (
                f"accelerated: 1 hour every {self.hour_every:g} s, replaying the last {BACKFILL_HOURS} hours "
                "from " + iso(self.virtual_now) + ", then real time"
            )
            if self.real_time_only:
                names = ", ".join(sorted(self.real_time_only))
                text += f"; not replayed, on real time only (they fire more than once an hour): {names}"
            return text
        return "real time (fire on demand with `python -m local fire-schedule`)"

    def start(self) -> None:
        if not self.bridge.topology.schedules:
            return
        for spec in self.bridge.topology.schedules:
            if occurrences(spec.expression, spec.timezone, self.virtual_now, self.virtual_now) is None:
                self.log(
                    f"schedule {spec.name}: {spec.expression} is not run by the local clock; "
                    "fire it on demand"
                )
        self._thread = threading.Thread(target=self._run, name="scheduler-clock", daemon=True)
        self._thread.start()

    def replaying(self, now: datetime) -> bool:
        """Still in the accelerated backfill (the virtual hour has not reached the current one)."""
        return bool(self.hour_every) and self.virtual_now < now.replace(minute=0, second=0, microsecond=0)

    def _run(self) -> None:
        next_hour = time.monotonic() + (self.hour_every or 0.0)
        while True:
            wait = TICK_SECONDS
            if self.replaying(datetime.now(UTC)):
                wait = min(TICK_SECONDS, max(0.0, next_hour - time.monotonic()))
            if self._stop.wait(wait):
                return
            try:
                next_hour = self._tick(next_hour)
            except Exception:
                if self._stop.is_set():
                    return  # the stage is closing: a firing its shutdown cut short is the end, not a fault
                raise

    def _tick(self, next_hour: float) -> float:
        """Fire what fell due since the last tick; returns when the next virtual hour starts."""
        now = datetime.now(UTC)
        if self.real_time_only:
            self._fire_between(self.real_now, now, real_time_only=True)
            self.real_now = now
        if self.replaying(now):
            if time.monotonic() < next_hour:
                return next_hour
            end = self.virtual_now + timedelta(hours=1)
        else:
            end = now
        self._fire_between(self.virtual_now, end, real_time_only=False)
        self.virtual_now = end
        # The next virtual hour starts hour_every after this one has been put, as before.
        return time.monotonic() + (self.hour_every or 0.0)

    def _fire_between(self, start: datetime, end: datetime, *, real_time_only: bool) -> None:
        """Fire the occurrences in ``(start, end]`` of the real-time-only schedules, or of the others."""
        for spec in self.bridge.topology.schedules:
            if not spec.enabled or (spec.name in self.real_time_only) is not real_time_only:
                continue
            for moment in occurrences(spec.expression, spec.timezone, start, end) or []:
                if self._stop.is_set():
                    return  # closed: fire nothing more into an emulator that is going away
                firing = self.bridge._fire(spec, moment)
                self.fired.append(firing)
                self.log(f"\nschedule {spec.name} fired for {firing.scheduled_time}")

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
