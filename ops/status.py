"""``python -m ops status``: every queue and DLQ of a stage, every alarm with its state and the runbook entry
it names, each mapping's state.

It never receives a message: depths come from GetQueueAttributes (visible, in flight, delayed), so a
look at a DLQ changes nothing in it. The oldest message's age is not a queue attribute:

- on AWS it is CloudWatch's ``ApproximateAgeOfOldestMessage`` (the latest datapoint of the last 30
  minutes, shown with how old that datapoint is: SQS publishes it about once a minute);
- in the sandbox it comes from the emulator's queue-age endpoint (``GET {endpoint}/_relay/sqs/queues``,
  through ``emulator.sqs_admin.queue_ages``), and is "n/a" while the running emulator has none.

Both sit behind ``AgeSource``; ``age_source(app)`` picks one. ``ops dlq redrive`` reads the source queue's
age through the same interface.

The alarms are DescribeAlarms' (on AWS, and in the sandbox, which evaluates them:
``emulator.alarm_service``), those in ALARM first. Each alarm's description is its runbook entry: it
names the ``python -m ops`` commands to run (``tests/infra/test_runbook.py`` holds every one to a
command that exists), and docs/ops.md's runbook table says more about each kind of alarm.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch.type_defs import MetricDataQueryTypeDef

from ops.app import DECLARED, AlarmInfo, App, MappingInfo, QueueInfo, add_connection_arguments, connect

AGE_METRIC = "ApproximateAgeOfOldestMessage"
AGE_WINDOW = timedelta(minutes=30)
RUNBOOK = "docs/ops.md#runbook-each-alarm-what-it-means-what-to-run"
# A command an alarm's description names: `python -m ops dlq redrive points --reason '...' --dry-run`.
_COMMAND = re.compile(r"`(python -m ops [^`]+)`")
_STATE_ORDER = {"ALARM": 0, "INSUFFICIENT_DATA": 1, "OK": 2}


def runbook_commands(description: str) -> list[str]:
    """The ``python -m ops`` commands an alarm's description names, in its order: its runbook entry."""
    return _COMMAND.findall(description)


# -- the age of the oldest message -------------------------------------------------------------------


@dataclass(frozen=True)
class QueueAge:
    """The contract of ``emulator.sqs_admin.queue_ages(endpoint) -> dict[url, QueueAge]`` (the sandbox)."""

    visible: int
    in_flight: int
    delayed: int
    oldest_age_seconds: float | None


@dataclass(frozen=True)
class AgeReading:
    seconds: float | None  # None: unknown (no datapoint, no endpoint) or an empty queue
    as_of: datetime | None = None  # when CloudWatch measured it; None for a live reading
    note: str = ""  # why it is unknown

    def describe(self, now: datetime | None = None) -> str:
        if self.seconds is None:
            return self.note or "n/a"
        text = _duration(self.seconds)
        if self.as_of is not None:
            lag = ((now or datetime.now(UTC)) - self.as_of).total_seconds()
            text += f" ({_duration(max(lag, 0))} ago)"
        return text


class AgeSource(Protocol):
    """Where the oldest message's age comes from. ``read`` answers by queue name."""

    description: str

    def read(self, queues: Sequence[QueueInfo]) -> dict[str, AgeReading]: ...


class CloudWatchAges:
    """``ApproximateAgeOfOldestMessage`` (Maximum, 1-minute periods) from CloudWatch, one GetMetricData
    for up to 500 queues."""

    description = "CloudWatch ApproximateAgeOfOldestMessage (latest datapoint)"

    def __init__(self, app: App, *, now: Callable[[], datetime] | None = None) -> None:
        self.app = app
        self.now = now or (lambda: datetime.now(UTC))

    def read(self, queues: Sequence[QueueInfo]) -> dict[str, AgeReading]:
        cw = self.app.client("cloudwatch")
        end = self.now()
        readings: dict[str, AgeReading] = {}
        for start in range(0, len(queues), 500):
            chunk = list(queues[start : start + 500])
            queries: list[MetricDataQueryTypeDef] = [
                {
                    "Id": f"q{i}",
                    "MetricStat": {
                        "Metric": {
                            "Namespace": "AWS/SQS",
                            "MetricName": AGE_METRIC,
                            "Dimensions": [{"Name": "QueueName", "Value": q.name}],
                        },
                        "Period": 60,
                        "Stat": "Maximum",
                    },
                    "ReturnData": True,
                }
                for i, q in enumerate(chunk)
            ]
            results = cw.get_metric_data(
                MetricDataQueries=queries,
                StartTime=end - AGE_WINDOW,
                EndTime=end + timedelta(minutes=1),
                ScanBy="TimestampDescending",
            ).get("MetricDataResults", [])
            by_id = {r["Id"]: r for r in results}
            for i, q in enumerate(chunk):
                result = by_id.get(f"q{i}", {})
                points = sorted(
                    zip(result.get("Timestamps", []), result.get("Values", []), strict=False),
                    key=lambda p: p[0],
                )
                if points:
                    at, value = points[-1]
                    readings[q.name] = AgeReading(float(value), as_of=at.astimezone(UTC))
                else:
                    readings[q.name] = AgeReading(None, note="n/a (no datapoint in 30 min)")
        return readings


class SandboxAges:
    """The sandbox emulator's own view (``emulator.sqs_admin``), or "n/a" while it has none."""

    description = "the sandbox emulator's /_relay/sqs/queues"

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    def read(self, queues: Sequence[QueueInfo]) -> dict[str, AgeReading]:
        try:
            from emulator.sqs_admin import queue_ages
        except ImportError:
            return self._unknown(queues, "n/a (this checkout has no emulator.sqs_admin)")
        try:
            ages: Mapping[str, Any] = queue_ages(self.endpoint)
        except Exception as exc:  # a 404 from an emulator without the endpoint, a connection error...
            code = getattr(exc, "code", None)
            why = "the emulator has no /_relay/sqs/queues" if code == 404 else type(exc).__name__
            return self._unknown(queues, f"n/a ({why})")
        by_name = {str(url).rstrip("/").rsplit("/", 1)[-1]: age for url, age in ages.items()}
        readings = {}
        for q in queues:
            age = ages.get(q.url) or by_name.get(q.name)
            seconds = getattr(age, "oldest_age_seconds", None) if age is not None else None
            if age is None:
                readings[q.name] = AgeReading(None, note="n/a (not listed by the emulator)")
            elif seconds is None:
                readings[q.name] = AgeReading(None, note="-")  # empty: no oldest message
            else:
                readings[q.name] = AgeReading(float(seconds))
        return readings

    @staticmethod
    def _unknown(queues: Sequence[QueueInfo], note: str) -> dict[str, AgeReading]:
        return {q.name: AgeReading(None, note=note) for q in queues}


def age_source(app: App) -> AgeSource:
    if app.is_local and app.endpoint_url:
        return SandboxAges(app.endpoint_url)
    return CloudWatchAges(app)


# -- the snapshot ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueStatus:
    queue: QueueInfo
    visible: int
    in_flight: int
    delayed: int
    age: AgeReading


@dataclass
class Snapshot:
    app: App
    taken_at: datetime
    queues: list[QueueStatus]
    alarms_in_alarm: list[Any]
    alarms_declared_only: int  # > 0 on an emulator that holds no alarms: they exist only in the templates
    mappings: list[MappingInfo]
    notes: list[str] = field(default_factory=list)
    alarms: list[AlarmInfo] = field(default_factory=list)  # every alarm, those in ALARM first

    def to_json(self) -> dict[str, Any]:
        def queue(s: QueueStatus) -> dict[str, Any]:
            return {
                "name": s.queue.name,
                "service": s.queue.service,
                "isDlq": s.queue.is_dlq,
                "visible": s.visible,
                "inFlight": s.in_flight,
                "delayed": s.delayed,
                "oldestAgeSeconds": s.age.seconds,
                "oldestAgeAsOf": s.age.as_of.isoformat() if s.age.as_of else None,
                "oldestAgeNote": s.age.note or None,
            }

        return {
            "stage": self.app.stage,
            "prefix": self.app.prefix,
            "endpoint": self.app.endpoint_url,
            "takenAt": self.taken_at.isoformat(),
            "queues": [queue(s) for s in self.queues if not s.queue.is_dlq],
            "dlqs": [queue(s) for s in self.queues if s.queue.is_dlq],
            "alarmsInAlarm": [
                {
                    "name": a.name,
                    "reason": a.reason,
                    "description": a.description,
                    "since": _iso(a.updated_at),
                }
                for a in self.alarms_in_alarm
            ],
            "alarmsDeclaredOnly": self.alarms_declared_only,
            "alarms": [
                {
                    "name": a.name,
                    "state": a.state,
                    "reason": a.reason,
                    "since": _iso(a.updated_at),
                    "description": a.description,
                    "runbook": runbook_commands(a.description),
                }
                for a in self.alarms
            ],
            "runbook": RUNBOOK,
            "mappings": [
                {
                    "function": m.function_name,
                    "source": m.source_arn,
                    "state": m.state,
                    "reportBatchItemFailures": m.report_batch_item_failures,
                    "declaredOnly": m.source == DECLARED,
                    "lastResult": m.last_result,
                }
                for m in self.mappings
            ],
            "notes": self.notes,
        }


def take_snapshot(app: App, ages: AgeSource | None = None) -> Snapshot:
    """Read everything once. GetQueueAttributes, DescribeAlarms, ListEventSourceMappings: no receive."""
    queues = app.queues()
    source = ages or age_source(app)
    readings = source.read(queues)
    statuses = [
        QueueStatus(q, q.visible, q.in_flight, q.delayed, readings.get(q.name, AgeReading(None)))
        for q in queues
    ]
    notes: list[str] = []
    declared_only = 0
    alarms: list[AlarmInfo] = []
    if app.alarms_declared_only():
        declared_only = len(app.declared().alarms)
        notes.append(
            f"alarms: this emulator holds none ({declared_only} declared in cdk.out; none can fire): an "
            "older sandbox? `make local` creates and evaluates them"
        )
        in_alarm = []
    else:
        alarms = sorted(app.alarms(), key=lambda a: (_STATE_ORDER.get(a.state or "", 3), a.name))
        in_alarm = [a for a in alarms if a.state == "ALARM"]
    mappings = app.event_source_mappings()
    if any(m.source == DECLARED for m in mappings):
        notes.append(
            "mappings: the sandbox runs them outside its emulator, so they are read from cdk.out "
            "(state as declared; the running sandbox polls every declared mapping)"
        )
    if not queues:
        notes.append(f"no queues named {app.prefix}-* (is the stage deployed, or the sandbox running?)")
    return Snapshot(app, datetime.now(UTC), statuses, in_alarm, declared_only, mappings, notes, alarms)


def render(snapshot: Snapshot) -> str:
    app = snapshot.app
    lines = [f"{app.describe()}  {snapshot.taken_at.isoformat(timespec='seconds').replace('+00:00', 'Z')}"]
    width = max([len(s.queue.short) for s in snapshot.queues] + [24])
    header = f"  {'':{width}}  {'visible':>8} {'in flight':>9} {'delayed':>8}  oldest message"
    for title, dlq in (("queues", False), ("DLQs", True)):
        rows = [s for s in snapshot.queues if s.queue.is_dlq == dlq]
        lines.append(f"{title} ({len(rows)})")
        if rows:
            lines.append(header)
        for s in rows:
            flag = "  <- parked" if dlq and (s.visible or s.in_flight) else ""
            lines.append(
                f"  {s.queue.short:{width}}  {s.visible:>8} {s.in_flight:>9} {s.delayed:>8}  "
                f"{s.age.describe(snapshot.taken_at)}{flag}"
            )
    if snapshot.alarms_declared_only:
        lines.append(f"alarms in ALARM: n/a ({snapshot.alarms_declared_only} declared; none held)")
    else:
        lines.append(
            f"alarms in ALARM ({len(snapshot.alarms_in_alarm)}) of {len(snapshot.alarms)}; runbook: {RUNBOOK}"
        )
        for alarm in snapshot.alarms:
            name = alarm.name.removeprefix(f"{app.prefix}-")
            if alarm.state == "ALARM":
                since = f" since {_iso(alarm.updated_at)}" if alarm.updated_at else ""
                lines.append(f"  ALARM              {name}{since}: {alarm.description or alarm.reason}")
                continue
            commands = runbook_commands(alarm.description)
            runbook = f"  runbook: {'; '.join(commands)}" if commands else ""
            lines.append(f"  {alarm.state or 'n/a':18s} {name}{runbook}")
    lines.append(f"event source mappings ({len(snapshot.mappings)})")
    for m in snapshot.mappings:
        source = m.source_arn.rsplit(":", 1)[-1]
        if "/stream/" in m.source_arn:
            source = "stream of " + m.source_arn.split(":table/", 1)[-1].split("/stream/", 1)[0]
        source = source.removeprefix(f"{app.prefix}-")
        extras = []
        if m.is_sqs and not m.report_batch_item_failures:
            extras.append("NO ReportBatchItemFailures")
        if m.last_result and m.last_result not in ("OK", "No records processed"):
            extras.append(f"last result: {m.last_result}")
        if m.source == DECLARED:
            extras.append("declared")
        extra = f"  ({', '.join(extras)})" if extras else ""
        lines.append(f"  {m.function_name.removeprefix(f'{app.prefix}-')} <- {source}: {m.state}{extra}")
    lines.extend(f"note: {n}" for n in snapshot.notes)
    return "\n".join(lines)


# -- the command ---------------------------------------------------------------------------------------


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "status",
        help="queues and DLQs (visible, in flight, delayed, oldest), alarms (state, runbook), mappings; "
        "never receives",
        description="One look at a stage: every queue and DLQ with its visible, in-flight and delayed "
        "messages and the age of its oldest message, every alarm with its state (those in ALARM first) and "
        "the runbook commands its description names, and the state of each event "
        "source mapping. Reads queue attributes only: it never receives a message, so it changes nothing.",
    )
    add_connection_arguments(parser)
    parser.add_argument(
        "--watch", type=float, metavar="SECONDS", help="repeat every SECONDS until Ctrl-C (>= 1)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON (one object per snapshot)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.watch is not None and args.watch < 1:
        print("error: --watch takes SECONDS >= 1", file=sys.stderr)
        return 2
    app = connect(args)
    ages = age_source(app)
    try:
        while True:
            snapshot = take_snapshot(app, ages)
            print(json.dumps(snapshot.to_json()) if args.json else render(snapshot), flush=True)
            if args.watch is None:
                return 0
            time.sleep(args.watch)
            if not args.json:
                print()
    except KeyboardInterrupt:
        return 0


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def _iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
