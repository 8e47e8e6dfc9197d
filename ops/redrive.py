"""The redrive engine of ``python -m ops dlq redrive`` (the command line is ``ops/dlq.py``): move a DLQ's
parked messages back to their source queue, verified, and audit every run.

A redrive:

1. ``dry_run``: receives EVERY message (each held invisible while the DLQ is read, then released),
   counts them by error class and event type, moves nothing;
2. the first batch (``first``, 5): receives N, sends each to its source queue (``relay.sourceQueue``
   when it names one of the stage's queues, else the queue whose RedrivePolicy targets the DLQ) and
   deletes it from the DLQ; then waits (``verify_timeout``) until the source queue is back to the
   backlog it had before, checks that none of the N came back to the DLQ (by the parked copy's
   ``relay.originalMessageId`` and the envelope's ``eventId``), and asks ``verify_business`` whether
   each event had its effect once (``ops.checks``: the processed marker, the operation's state, the
   side-effect record, as its consumer leaves them; plus any ``register_business_check``);
3. the rest with SQS's own move task (StartMessageMoveTask, ``rate`` messages a second), polled for
   progress while the DLQ is watched: a DLQ deeper than what is left to move means new parks, and the
   task is cancelled (CancelMessageMoveTask), as it is on Ctrl-C. A filtered redrive cannot use the
   move task (it moves every message), so it moves the matching ones one by one at the rate instead.

Every redrive, dry runs included, has a reason and ends with an audit record (who, from STS
GetCallerIdentity; when; the reason; the DLQ; the counts; the outcome), printed and appended to the
audit file (JSON lines). ``Redrive.run`` returns the command's exit code: 0 done, 1 stopped (the first
batch failed, new parks, the move task failed or was cancelled), 2 refused.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ops.app import App, OpsError, QueueInfo
from ops.checks import first_batch_problems
from ops.ledger import mark_moved, mark_parked_before
from ops.parked import (
    STALE_ROUNDS,
    Moved,
    Parked,
    Reader,
    Received,
    check_samplable,
    depth,
    iso,
    read_parked,
)
from ops.status import AgeReading, AgeSource, age_source

SCAN_VISIBILITY_SECONDS = 120  # a dry run or a filtered redrive holds what it read while it reads on
MOVE_VISIBILITY_SECONDS = 60  # a message being moved by hand: send + delete take well under that
DEFAULT_AUDIT_FILE = Path(".ops/redrive-audit.jsonl")

EXIT_OK, EXIT_STOPPED, EXIT_USAGE = 0, 1, 2


# -- the business checks hook ------------------------------------------------------------------------

BusinessCheck = Callable[[App, Sequence[Moved]], list[str]]
_BUSINESS_CHECKS: list[BusinessCheck] = []


def register_business_check(check: BusinessCheck) -> BusinessCheck:
    """Add a check run after a redrive's first batch, beside ``ops.checks``' own: ``check(app, batch)``
    returns problems (empty: fine). Usable as a decorator."""
    _BUSINESS_CHECKS.append(check)
    return check


def verify_business(app: App, batch: Sequence[Moved]) -> list[str]:
    """The business state checks of the first batch: each event's effect, as its consumer records it
    (``ops.checks``), and every registered check's problems."""
    problems = first_batch_problems(app, batch)
    for check in _BUSINESS_CHECKS:
        problems.extend(check(app, batch))
    return problems


# -- redrive ---------------------------------------------------------------------------------------


@dataclass
class RedriveOptions:
    reason: str
    dry_run: bool = False
    first: int = 5
    rate: int | None = None
    filters: Mapping[str, str] = field(default_factory=dict)
    verify_timeout: float = 300.0
    poll_seconds: float = 5.0
    scan_limit: int = 10_000
    audit_file: Path = DEFAULT_AUDIT_FILE
    assume_yes: bool = False
    force: bool = False


class Stopped(Exception):
    """The redrive stopped on purpose (exit 1); the message says why and what to do."""


class Redrive:
    """One ``ops dlq redrive`` run. ``sleep``/``clock``/``ages``/``business`` are injectable for tests."""

    def __init__(
        self,
        app: App,
        dlq: QueueInfo,
        options: RedriveOptions,
        *,
        out: Callable[[str], None] = print,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        ages: AgeSource | None = None,
        business: BusinessCheck = verify_business,
    ) -> None:
        self.app = app
        self.dlq = dlq
        self.options = options
        self.out = out
        self.sleep = sleep
        self.clock = clock
        self.ages = ages
        self.business = business
        self.sqs = app.client("sqs")
        self.moved: list[Moved] = []
        self.move_task_moved = 0
        self.counts: dict[str, Any] = {}
        self._queues = {q.name: q for q in app.queues()}
        self._last_send = 0.0

    # where messages go ------------------------------------------------------------------------

    @property
    def redrive_source(self) -> QueueInfo | None:
        """The queue whose RedrivePolicy targets this DLQ, when exactly one does."""
        sources = [self._queues[n] for n in self.dlq.sources if n in self._queues]
        return sources[0] if len(sources) == 1 else None

    def destination(self, parked: Parked) -> QueueInfo | None:
        """``relay.sourceQueue`` when it names one of the stage's (non-DLQ) queues, else the queue
        EventBridge failed to deliver to (a bus rule's target DLQ: ``TARGET_ARN``), else the redrive
        source. Never a queue outside the stage: the attribute is data, not an address to trust."""
        if parked.source_queue:
            name = parked.source_queue.rstrip("/").rsplit("/", 1)[-1]
            queue = self._queues.get(name)
            if queue is not None and not queue.is_dlq:
                return queue
        target = parked.reasons.get("TARGET_ARN", "")
        if target.startswith("arn:aws:sqs:"):
            queue = self._queues.get(target.rsplit(":", 1)[-1])
            if queue is not None and not queue.is_dlq:
                return queue
        return self.redrive_source

    # the run ----------------------------------------------------------------------------------------

    def run(self) -> int:
        started = datetime.now(UTC)
        outcome, detail, code = "ok", "", EXIT_OK
        try:
            check_samplable(self.dlq, force=self.options.force)
            if self.options.dry_run:
                self._dry_run()
                outcome, detail = "dry-run", "nothing moved"
            else:
                self._redrive()
                detail = f"moved {self._total_moved()} message(s)"
        except Stopped as exc:
            outcome, detail, code = "stopped", str(exc), EXIT_STOPPED
            self.out(f"STOPPED: {exc}")
        except KeyboardInterrupt:
            outcome, detail, code = "interrupted", "Ctrl-C", EXIT_STOPPED
            self.out("interrupted (Ctrl-C)")
        except OpsError as exc:
            outcome, detail, code = "refused", str(exc), EXIT_USAGE
            self.out(f"error: {exc}")
        except Exception as exc:  # AWS refused something: recorded as such, then reported by the CLI
            outcome, detail = "error", f"{type(exc).__name__}: {exc}"
            raise
        finally:
            self._audit(started, outcome, detail)
        return code

    def _total_moved(self) -> int:
        return len(self.moved) + self.move_task_moved

    def _read_all(self) -> list[Parked]:
        """Every DLQ message (up to ``--scan-limit``), read and released at once."""
        reader = Reader(self.app, self.dlq, visibility=SCAN_VISIBILITY_SECONDS)
        held: list[Received] = []
        try:
            held, _ = reader.scan(self.options.scan_limit)
            return [read_parked(m) for m in held]
        finally:
            reader.release(held)

    def _dry_run(self) -> None:
        visible, in_flight, _ = depth(self.app, self.dlq)
        parked = self._read_all()
        matching = [p for p in parked if p.matches(self.options.filters)]
        by_class = Counter(p.error_class for p in matching)
        by_type = Counter(p.event_type or "(unreadable)" for p in matching)
        by_destination = Counter(
            (d.short if (d := self.destination(p)) else "(nowhere: no source queue)") for p in matching
        )
        self.counts = {
            "inDlq": visible + in_flight,
            "read": len(parked),
            "wouldMove": len(matching),
            "byErrorClass": dict(by_class),
            "byEventType": dict(by_type),
            "byDestination": dict(by_destination),
        }
        where = f" matching {filters_text(self.options.filters)}" if self.options.filters else ""
        self.out(
            f"dry run: read {len(parked)} of ~{visible + in_flight} message(s); "
            f"{len(matching)} would move{where}"
        )
        for title, counter in (
            ("by error class", by_class),
            ("by event type", by_type),
            ("to", by_destination),
        ):
            self.out(f"  {title}:")
            for key, count in counter.most_common():
                self.out(f"    {count:6d}  {key}")
        if len(parked) >= self.options.scan_limit:
            self.out(f"  (stopped reading at --scan-limit {self.options.scan_limit})")

    def _redrive(self) -> None:
        visible, in_flight, _ = depth(self.app, self.dlq)
        self.counts = {"inDlqAtStart": visible + in_flight}
        if visible + in_flight == 0:
            self.out(f"{self.dlq.short} is empty: nothing to redrive")
            return
        first = self._first_batch()
        if not first:
            self.out("nothing moved" + (" (nothing matched the filter)" if self.options.filters else ""))
            return
        self._verify(first)
        if self.options.filters:
            self._move_one_by_one()
        else:
            self._move_task()
        self.counts["moved"] = self._total_moved()

    # the first batch --------------------------------------------------------------------------

    def _first_batch(self) -> list[Moved]:
        n = self.options.first
        filters = self.options.filters
        reader = Reader(self.app, self.dlq, visibility=MOVE_VISIBILITY_SECONDS)
        if filters:
            kept, others = reader.scan(n, keep=lambda m: read_parked(m).matches(filters))
        else:
            kept, others = reader.scan(n)
        reader.release(others)
        destinations = {d.name for p in map(read_parked, kept) if (d := self.destination(p))}
        self._baseline = {name: self._total(self._queues[name]) for name in destinations}
        self.out(f"first batch: moving {len(kept)} message(s)")
        batch: list[Moved] = []
        skipped: list[Received] = []
        try:
            for message in kept:
                moved = self._move(message)
                if moved is None:
                    skipped.append(message)
                else:
                    batch.append(moved)
        except BaseException:
            # Give back at once what was not moved, rather than leave it hidden for the visibility.
            done = {m.parked.message_id for m in batch}
            with contextlib.suppress(Exception):
                reader.release([m for m in kept if m.message_id not in done])
            raise
        reader.release(skipped)
        self.counts["firstBatch"] = len(batch)
        return batch

    def _move(self, message: Received) -> Moved | None:
        """Send to the source queue, then delete from the DLQ. In that order: a crash in between leaves
        a duplicate in the source queue, which the consumers' processed markers make harmless, and
        never a lost message."""
        parked = read_parked(message)
        destination = self.destination(parked)
        if destination is None:
            self.out(
                f"  {message.message_id}: left in the DLQ: no source queue (no relay.sourceQueue, "
                "and no queue's RedrivePolicy targets this DLQ)"
            )
            return None
        self._pace()
        request: dict[str, Any] = {"QueueUrl": destination.url, "MessageBody": message.body}
        attributes = _send_attributes(message.message_attributes)
        if attributes:
            request["MessageAttributes"] = attributes
        if destination.fifo:
            request["MessageGroupId"] = message.attributes.get("MessageGroupId") or "relay-redrive"
            # Our own retry of this send dedupes; the original's dedup id might drop it as a repeat.
            request["MessageDeduplicationId"] = f"redrive-{message.message_id}"[:128]
        new_id = str(self.sqs.send_message(**request)["MessageId"])
        self.sqs.delete_message(QueueUrl=self.dlq.url, ReceiptHandle=message.receipt_handle)
        moved = Moved(parked, destination.name, new_id)
        self.moved.append(moved)
        # The parked ledger: this message is parked no more (keyed by its original messageId).
        mark_moved(
            self.app,
            parked.reasons.get("sourceQueue") or destination.url,
            [parked.reasons.get("originalMessageId", "")],
            reason=self.options.reason,
        )
        self.out(
            f"  moved {message.message_id} → {destination.short} as {new_id}"
            f"  ({parked.error_class}; {parked.event_type or '?'} {parked.event_id or ''})".rstrip()
        )
        return moved

    def _pace(self) -> None:
        rate = self.options.rate
        if not rate:
            return
        wait = self._last_send + 1.0 / rate - self.clock()
        if wait > 0:
            self.sleep(wait)
        self._last_send = self.clock()

    def _total(self, queue: QueueInfo) -> int:
        return sum(depth(self.app, queue))

    def _verify(self, batch: Sequence[Moved]) -> None:
        """The source queues are back to their backlog before the batch, none of the batch is back in
        the DLQ, and the business checks have nothing to say."""
        expected_dlq = self.counts["inDlqAtStart"] - len(batch)
        deadline = self.clock() + self.options.verify_timeout
        waiting = dict(self._baseline)
        self.out(
            f"verifying: waiting up to {self.options.verify_timeout:.0f} s for the consumer(s) to drain "
            "the batch"
        )
        while waiting:
            for name in list(waiting):
                queue = self._queues[name]
                visible, in_flight, delayed = depth(self.app, queue)
                if visible + in_flight + delayed <= waiting[name]:
                    del waiting[name]
                    self.out(f"  {queue.short}: drained (back to {visible + in_flight + delayed})")
            if not waiting:
                break
            if self.clock() >= deadline:
                left = ", ".join(
                    f"{self._queues[n].short} holds {self._describe_depth(self._queues[n])}" for n in waiting
                )
                raise Stopped(
                    f"the first batch was not consumed within {self.options.verify_timeout:.0f} s ({left}); "
                    "is the consumer running (python -m ops status)? Nothing more was moved"
                )
            self.sleep(self.options.poll_seconds)
        back = self._back_in_dlq(batch, expected_dlq)
        if back:
            reasons = "; ".join(
                f"{p.event_id or p.message_id}: {p.error_class}: {p.reasons.get('errorMessage', '')}"
                for p in back[:5]
            )
            raise Stopped(
                f"{len(back)} of the first batch's {len(batch)} message(s) were parked again ({reasons}). "
                "The cause is not fixed; nothing more was moved"
            )
        problems = self.business(self.app, batch)
        if problems:
            raise Stopped("the business checks failed after the first batch: " + "; ".join(problems))
        self.out(f"first batch OK: {len(batch)} consumed, none parked again")

    def _describe_depth(self, queue: QueueInfo) -> str:
        visible, in_flight, delayed = depth(self.app, queue)
        text = f"{visible} visible, {in_flight} in flight, {delayed} delayed"
        if delayed:
            text += " (delayed: retries the kernel scheduled)"
        return text

    def _back_in_dlq(self, batch: Sequence[Moved], expected: int) -> list[Parked]:
        """The batch's messages found in the DLQ again: only read (a sample of the DLQ) when its depth
        says something arrived."""
        visible, in_flight, _ = depth(self.app, self.dlq)
        if visible + in_flight <= expected:
            return []
        new_ids = {m.new_message_id for m in batch}
        event_ids = {m.parked.event_id for m in batch if m.parked.event_id}
        parked = self._read_all()
        back = [
            p for p in parked if p.original_message_id in new_ids or (p.event_id and p.event_id in event_ids)
        ]
        if not back:
            self.out(
                f"  note: the DLQ holds {visible + in_flight - expected} more than expected, none of "
                "them from the first batch (other traffic is being parked)"
            )
        return back

    # the rest ---------------------------------------------------------------------------------------

    def _move_task(self) -> None:
        destination = self.redrive_source
        if destination is None:
            raise Stopped(
                f"no queue's RedrivePolicy targets {self.dlq.short}, so SQS's move task has nowhere to send "
                "the rest; move them by hand with --filter (e.g. --filter errorClass=…), one by one"
            )
        visible, in_flight, _ = depth(self.app, self.dlq)
        start = visible + in_flight
        if start == 0:
            self.out("the rest: nothing left in the DLQ")
            return
        if not hasattr(self.sqs, "start_message_move_task"):
            raise Stopped("this botocore has no StartMessageMoveTask; upgrade boto3")
        request: dict[str, Any] = {"SourceArn": self.dlq.arn, "DestinationArn": destination.arn}
        if self.options.rate:
            request["MaxNumberOfMessagesPerSecond"] = self.options.rate
        try:
            handle = str(self.sqs.start_message_move_task(**request)["TaskHandle"])
        except Exception as exc:  # moto (and the sandbox until it has one) do not implement it
            raise Stopped(
                f"StartMessageMoveTask failed ({type(exc).__name__}: {exc}); the first batch was moved and "
                "verified: move the rest one by one with --filter (e.g. --filter errorClass=<class>)"
            ) from None
        task_started = datetime.now(UTC)
        rate = f"{self.options.rate}/s" if self.options.rate else "SQS's own pace"
        self.out(
            f"the rest: SQS move task {handle[:16]}… started "
            f"({start} message(s) → {destination.short}, {rate})"
        )
        strikes = 0
        try:
            while True:
                self.sleep(self.options.poll_seconds)
                task = self._task()
                status = str(task.get("Status", "?"))
                moved = int(task.get("ApproximateNumberOfMessagesMoved", 0))
                to_move = int(task.get("ApproximateNumberOfMessagesToMove", start) or start)
                self.move_task_moved = moved
                visible, in_flight, _ = depth(self.app, self.dlq)
                now_in_dlq = visible + in_flight
                new_parks = now_in_dlq - max(start - moved, 0)
                age = self._source_age(destination)
                self.out(
                    f"  {status.lower()}: {moved}/{to_move} moved; DLQ {now_in_dlq} (left to move "
                    f"{max(start - moved, 0)}); {destination.short} oldest {age.describe()}"
                )
                if status == "COMPLETED":
                    break
                if status in ("CANCELLED", "CANCELLING", "FAILED"):
                    raise Stopped(
                        f"the move task ended {status}: {task.get('FailureReason', 'no reason given')}"
                    )
                strikes = strikes + 1 if new_parks > 0 else 0
                if strikes >= 2:  # twice in a row: not a count that lags behind the moves
                    self._cancel(handle, f"{new_parks} new message(s) parked while moving")
                    raise Stopped(
                        f"{new_parks} message(s) were parked again while the move task ran; cancelled it "
                        f"after {moved} moved. Sample the DLQ (python -m ops dlq sample {self.dlq.short})"
                    )
        except KeyboardInterrupt:
            self._cancel(handle, "Ctrl-C")
            raise
        self.out(f"the rest: move task COMPLETED, {self.move_task_moved} moved")
        marked = mark_parked_before(self.app, destination.url, task_started, reason=self.options.reason)
        noun = "entry" if marked == 1 else "entries"
        self.out(f"parked ledger: {marked} {noun} of {destination.short} marked REDRIVEN")

    def _task(self) -> Mapping[str, Any]:
        results = self.sqs.list_message_move_tasks(SourceArn=self.dlq.arn, MaxResults=1).get("Results", [])
        if not results:
            raise Stopped("ListMessageMoveTasks shows no task for the DLQ")
        task: Mapping[str, Any] = results[0]
        return task

    def _cancel(self, handle: str, why: str) -> None:
        try:
            response = self.sqs.cancel_message_move_task(TaskHandle=handle)
            self.out(
                f"cancelled the move task ({why}); "
                f"{response.get('ApproximateNumberOfMessagesMoved', '?')} moved"
            )
        except Exception as exc:  # already finished, or the endpoint refuses: say so, stop anyway
            self.out(f"could not cancel the move task ({why}): {exc}")

    def _source_age(self, queue: QueueInfo) -> AgeReading:
        if self.ages is None:
            self.ages = age_source(self.app)
        return self.ages.read([queue]).get(queue.name, AgeReading(None))

    def _move_one_by_one(self) -> None:
        filters = self.options.filters
        self.out(
            f"the rest: one by one (a --filter redrive cannot use SQS's move task, which moves every "
            f"message), matching {filters_text(filters)}"
            + (f", {self.options.rate}/s" if self.options.rate else "")
        )
        ours = {m.new_message_id for m in self.moved}
        event_ids = {m.parked.event_id for m in self.moved if m.parked.event_id}
        reader = Reader(self.app, self.dlq, visibility=SCAN_VISIBILITY_SECONDS)
        held: dict[str, Received] = {}
        stale = 0
        moved_here = 0
        try:
            while stale < STALE_ROUNDS:
                batch = reader.receive(10)
                if not batch:
                    break
                new = 0
                for message in batch:
                    if message.message_id in held:
                        held[message.message_id] = message  # reappeared: keep the newest handle
                        continue
                    new += 1
                    parked = read_parked(message)
                    if not parked.matches(filters):
                        held[message.message_id] = message
                        continue
                    if parked.original_message_id in ours or (
                        parked.event_id and parked.event_id in event_ids
                    ):
                        held[message.message_id] = message
                        raise Stopped(
                            f"{parked.event_id or parked.message_id} came back to the DLQ after being moved "
                            f"({parked.error_class}); stopped after {moved_here} more"
                        )
                    moved = self._move(message)
                    if moved is None:
                        held[message.message_id] = message
                        continue
                    moved_here += 1
                    ours.add(moved.new_message_id)
                    if parked.event_id:
                        event_ids.add(parked.event_id)
                stale = 0 if new else stale + 1
        finally:
            reader.release(held.values())
        self.out(f"the rest: moved {moved_here} more one by one")

    # the audit record ---------------------------------------------------------------------------

    def _audit(self, started: datetime, outcome: str, detail: str) -> None:
        try:
            who = self.app.caller()
        except Exception as exc:  # still record the redrive: the operator's login is the next best thing
            who = f"unknown (GetCallerIdentity failed: {type(exc).__name__})"
        destination = self.redrive_source
        record = {
            "at": iso(started),
            "finishedAt": iso(datetime.now(UTC)),
            "who": who,
            "operator": getpass.getuser(),
            "stage": self.app.stage,
            "region": self.app.effective_region,
            "endpoint": self.app.endpoint_url,
            "dlq": self.dlq.name,
            "destination": destination.name if destination else None,
            "reason": self.options.reason,
            "dryRun": self.options.dry_run,
            "filters": dict(self.options.filters),
            "first": self.options.first,
            "rate": self.options.rate,
            "counts": {
                **self.counts,
                "movedByHand": len(self.moved),
                "movedByMoveTask": self.move_task_moved,
            },
            "eventIds": [m.parked.event_id for m in self.moved if m.parked.event_id][:100],
            "outcome": outcome,
            "detail": detail,
        }
        line = json.dumps(record, sort_keys=True)
        path = self.options.audit_file
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as audit:
            audit.write(line + "\n")
        self.out(f"audit ({path}): {line}")


def _send_attributes(attributes: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """ReceiveMessage's attributes as SendMessage takes them: the reason travels with the message (a
    park after the redrive keeps ``relay.firstFailureAt``), everything else unchanged."""
    converted: dict[str, dict[str, Any]] = {}
    for name, value in attributes.items():
        data_type = value.get("DataType")
        if not data_type:
            continue
        if value.get("StringValue") is not None:
            converted[name] = {"DataType": data_type, "StringValue": value["StringValue"]}
        elif value.get("BinaryValue") is not None:
            converted[name] = {"DataType": data_type, "BinaryValue": value["BinaryValue"]}
    return converted


def filters_text(filters: Mapping[str, str]) -> str:
    return " and ".join(f"{k}={v}" for k, v in filters.items())
