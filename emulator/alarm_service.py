"""The stage's CloudWatch: metrics from the functions' logs, the queues and the runtime, and the
synthesized alarms evaluated on the stage's clock, their state changes published as CloudWatch does.

On AWS three things feed an alarm, and each has its stand-in here:

- CloudWatch Logs turns every Embedded Metric Format line a function prints (Powertools Metrics) into
  metrics: ``AlarmService`` tails each function's log (``<log_dir>/<function>.log``, where the runtime
  writes the function's output) and hands every new line to ``MetricStore.ingest_emf``;
- SQS reports ``ApproximateNumberOfMessagesVisible`` and ``ApproximateAgeOfOldestMessage`` of every queue
  each minute: each evaluation samples every queue an alarm watches, without receiving
  (``emulator.sqs_admin``);
- Lambda reports ``Invocations`` and ``Errors`` per function: ``record_invocation`` is the runtime's
  hook, called after every invocation (a timeout and a crash are errors, as on Lambda);
- EventBridge reports ``FailedInvocations`` (an event its rule could not deliver for good, sent to the
  DLQ or not) and ``InvocationsSentToDlq`` per rule, only when not zero, with the dimension
  ``RuleName`` for a rule on the default bus and ``EventBusName`` + ``RuleName`` for one on a custom bus
  (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-monitoring.html): ``rule_failures`` (the
  stage gives it the bus's and the API destinations' counts since the start) is read at each evaluation
  and the increase becomes a datapoint. An alarm whose dimensions name no such metric (``RuleName`` set
  to a custom-bus rule's ``Ref``, ``bus|rule``) sees no data, here as on AWS.

``evaluate()`` reads the new log lines, samples the queues and evaluates every alarm at the stage's
``now()`` (``emulator.alarms.AlarmEvaluator``: period, statistic, threshold, evaluation periods,
datapoints to alarm, missing data). A background thread evaluates every ``every`` seconds of wall
clock. The stage's clock is the wall clock plus an offset that only grows: ``evaluate(advance=61)``
moves it on first, so a test sees a one-minute period end without waiting for it, and the background
evaluations carry on from there (never back in time, which would bring old datapoints back into the
window). Metrics are stamped on the same clock.

Each state change is written to ``<log_dir>/alarms.log`` (the stage's time, the alarm, old → new, the
reason, the topics notified), not to the stage's console: a demo's transcript stays the demo's.
State changes go to the alarm's actions of the new state; CloudWatch publishes as the service
``cloudwatch.amazonaws.com``, so the topic's policy must allow it (``emulator.iam_report.service_may``,
recorded as a denial otherwise), and the publish itself is the sandbox's own call, not a function's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from emulator.alarms import AlarmEvaluator, Transition
from emulator.iam_report import service_may
from emulator.server import ACCOUNT_ID, REGION, client
from emulator.sqs_admin import queue_ages

SERVICE = "cloudwatch.amazonaws.com"
LAMBDA_NAMESPACE = "AWS/Lambda"
EVENTS_NAMESPACE = "AWS/Events"
# (event bus, rule name) -> (events failed for good, of them sent to the DLQ), since the start.
RuleFailures = Callable[[], Mapping[tuple[str, str], tuple[int, int]]]
# Every few seconds of wall clock: a one-minute period ends within a few seconds of its end on AWS too.
DEFAULT_EVERY = 5.0


class AlarmService:
    def __init__(
        self,
        endpoint: str,
        log_dir: Path,
        functions: Iterable[str],
        *,
        every: float = DEFAULT_EVERY,
        log: Callable[[str], Any] = print,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        rule_failures: RuleFailures | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.every = every
        self.log = log
        self.wall_clock = wall_clock
        self.transitions_log = log_dir / "alarms.log"
        self.rule_failures = rule_failures
        self._rule_counts: dict[tuple[str, str], tuple[int, int]] = {}
        self.offset = timedelta(0)
        self._last: datetime | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.transitions: list[tuple[datetime, Transition]] = []
        self.evaluations = 0
        # Lines written before the stage started are another run's: each log is read from its end now.
        self._logs = {path: _size(path) for path in (log_dir / f"{name}.log" for name in functions)}
        self._partial: dict[Path, bytes] = {}
        # The sandbox's own credentials and no glue marker: the request meter counts these calls as
        # "other", outside any operation's cost, as AWS bills an alarm by the month, not its evaluations.
        self.evaluator = AlarmEvaluator(
            client("cloudwatch", endpoint),
            client("sns", endpoint),
            region=REGION,
            account=ACCOUNT_ID,
            sampler=self._sample,
            authorize=lambda alarm_arn, topic_arn: service_may(
                endpoint, SERVICE, alarm_arn, "sns:Publish", topic_arn
            ),
        )

    # -- the clock ------------------------------------------------------------------------------------

    def now(self) -> datetime:
        """The stage's time: the wall clock plus the offset tests have advanced it by."""
        return self.wall_clock() + self.offset

    # -- metrics --------------------------------------------------------------------------------------

    def record_invocation(self, function: str, ok: bool) -> None:
        """Lambda's own metrics for one invocation (the runtime's hook)."""
        dims = {"FunctionName": function}
        at = self.now()
        # No lock: an evaluation in progress (seconds of AWS calls) must not hold up the invocation, and
        # an append to the store's lists is atomic.
        self.evaluator.store.put(LAMBDA_NAMESPACE, "Invocations", dims, 1.0, at)
        self.evaluator.store.put(LAMBDA_NAMESPACE, "Errors", dims, 0.0 if ok else 1.0, at)

    def ingest_logs(self) -> int:
        """Every complete line the functions wrote since the last read, as CloudWatch Logs would see it;
        the datapoints found."""
        found = 0
        for path, offset in self._logs.items():
            try:
                with path.open("rb") as handle:
                    handle.seek(offset)
                    data = self._partial.pop(path, b"") + handle.read()
                    self._logs[path] = handle.tell()
            except FileNotFoundError:
                continue
            lines = data.split(b"\n")
            if lines[-1]:
                self._partial[path] = lines[-1]  # the line is still being written
            for line in lines[:-1]:
                if line.startswith(b"{"):
                    text = line.decode("utf-8", "replace")
                    found += self.evaluator.store.ingest_emf(text, shift=self.offset)
        return found

    def sample_rules(self, now: datetime) -> None:
        """EventBridge's per-rule failure metrics: what each rule failed since the last evaluation."""
        if self.rule_failures is None:
            return
        for (bus, rule), (failed, to_dlq) in sorted(self.rule_failures().items()):
            before = self._rule_counts.get((bus, rule), (0, 0))
            self._rule_counts[(bus, rule)] = (failed, to_dlq)
            dims = {"RuleName": rule} if bus == "default" else {"EventBusName": bus, "RuleName": rule}
            if failed > before[0]:
                self.evaluator.store.put(EVENTS_NAMESPACE, "FailedInvocations", dims, failed - before[0], now)
            if to_dlq > before[1]:
                self.evaluator.store.put(
                    EVENTS_NAMESPACE, "InvocationsSentToDlq", dims, to_dlq - before[1], now
                )

    def _sample(self) -> Mapping[str, tuple[float, float]]:
        return {
            q.name: (float(q.visible), float(q.oldest_age_seconds or 0.0))
            for q in queue_ages(self.endpoint).values()
        }

    # -- evaluation -----------------------------------------------------------------------------------

    def evaluate(self, *, advance: float = 0.0) -> list[Transition]:
        """Read the logs, move the clock on by ``advance`` seconds, sample the queues and evaluate every
        alarm at ``now()``; the state changes, each published to its actions."""
        if advance < 0:
            raise ValueError(f"the stage's clock only moves forward (advance {advance})")
        with self._lock:
            self.ingest_logs()  # stamped before the clock moves: they were written before
            self.offset += timedelta(seconds=advance)
            now = self.now()
            if self._last is not None and now < self._last:
                now = self._last
            self._last = now
            self.sample_rules(now)
            changes = self.evaluator.evaluate(now)
            self.evaluations += 1
            self.transitions.extend((now, change) for change in changes)
        if changes:
            self._write(now, changes)
        return changes

    def _write(self, now: datetime, changes: list[Transition]) -> None:
        lines = []
        for change in changes:
            sent = ", ".join(t.rsplit(":", 1)[-1] for t in change.notified) or "no action"
            lines.append(
                f"{now.isoformat(timespec='seconds')} {change.alarm}: {change.old} -> {change.new} "
                f"(notified: {sent}) {change.reason}\n"
            )
        try:
            self.transitions_log.parent.mkdir(parents=True, exist_ok=True)
            with self.transitions_log.open("a", encoding="utf-8") as handle:
                handle.writelines(lines)
        except OSError as error:
            self.log(f"alarms: cannot write {self.transitions_log}: {error}")

    def describe(self) -> str:
        return (
            f"CloudWatch alarms evaluated every {self.every:g} s on the stage's clock "
            f"(wall clock + {self.offset.total_seconds():g} s), state changes in {self.transitions_log}"
        )

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="alarms", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.evaluate()
            except Exception as error:  # the emulator going away at close, or a transient failure
                if self._stop.is_set():
                    return
                self.log(f"alarms: evaluation failed, retried in {self.every:g} s: {error}")

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
