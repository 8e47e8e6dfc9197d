"""Redrive from the console: the engine of ``python -m ops dlq redrive`` (``ops.redrive.Redrive``), run in
a thread, with the same dry run, first batch, verification, move task and audit record.

The order the page must follow, enforced here rather than trusted to the page:

1. a dry run (``dry_run``) with a reason: it reads every message of the DLQ (receives, as the CLI's dry
   run does: receive counts go up by one) and returns its counts and a confirm token, bound to the DLQ
   and the reason and valid for ``CONFIRM_SECONDS``;
2. ``start`` with that token (once): the real redrive, as a job whose lines the page polls;
3. ``abort``: the job's next wait raises ``KeyboardInterrupt`` inside the engine, which is what Ctrl-C
   does to the CLI: a running move task is cancelled, and the audit record says ``interrupted``.

Nothing runs unless the console was started with ``--allow-redrive`` (``Refused`` otherwise).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ops.app import App, OpsError, QueueInfo
from ops.parked import check_samplable
from ops.redrive import DEFAULT_AUDIT_FILE, Redrive, RedriveOptions

CONFIRM_SECONDS = 600.0
READ_ONLY = (
    "this console is read-only: a redrive (its dry run included, which receives every message) needs the "
    "console started with --allow-redrive (python -m ops console --allow-redrive, or make local "
    "LOCAL_ARGS=--console-allow-redrive)"
)

READ_ONLY_REPLAY = (
    "this console is read-only: a replay needs the console started with --allow-redrive (python -m ops "
    "console --allow-redrive, or make local LOCAL_ARGS=--console-allow-redrive)"
)


class Refused(Exception):
    """A request the console will not carry out; ``status`` is the HTTP status that says why."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Job:
    id: str
    dlq: str
    reason: str
    lines: list[str] = field(default_factory=list)
    state: str = "running"  # running, done (exit 0), stopped (1), refused (2), error
    code: int | None = None
    error: str | None = None
    aborted: threading.Event = field(default_factory=threading.Event)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "dlq": self.dlq,
            "reason": self.reason,
            "state": self.state,
            "code": self.code,
            "error": self.error,
            "abortRequested": self.aborted.is_set(),
            "lines": list(self.lines),
        }


@dataclass
class _Confirm:
    dlq: str
    reason: str
    expires: float


class Redrives:
    """The console's redrives: dry runs, their confirm tokens, and the jobs they started."""

    def __init__(
        self,
        app: App,
        *,
        allowed: bool,
        audit_file: Path = DEFAULT_AUDIT_FILE,
        verify_timeout: float = 300.0,
        poll_seconds: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.allowed = allowed
        self.audit_file = audit_file
        self.verify_timeout = verify_timeout
        self.poll_seconds = poll_seconds
        self.clock = clock
        self.jobs: dict[str, Job] = {}
        self._confirms: dict[str, _Confirm] = {}
        self._lock = threading.Lock()

    def _check_allowed(self) -> None:
        if not self.allowed:
            raise Refused(READ_ONLY, 403)

    def _dlq(self, name: Any) -> QueueInfo:
        if not isinstance(name, str) or not name.strip():
            raise Refused("dlq: the DLQ's name is required (e.g. payments-payment-requests-dlq)")
        try:
            dlq = self.app.find_queue(name, dlq=True)
            check_samplable(dlq, force=False)
        except OpsError as exc:
            raise Refused(str(exc), 404 if "no DLQ matches" in str(exc) else 400) from None
        return dlq

    @staticmethod
    def _reason(reason: Any) -> str:
        if not isinstance(reason, str) or not reason.strip():
            raise Refused("reason: say why (the fix that was deployed): it goes into the audit record")
        if len(reason) > 1000:
            raise Refused("reason: at most 1000 characters")
        return reason.strip()

    def dry_run(self, body: dict[str, Any]) -> dict[str, Any]:
        self._check_allowed()
        dlq, reason = self._dlq(body.get("dlq")), self._reason(body.get("reason"))
        lines: list[str] = []
        options = RedriveOptions(reason=reason, dry_run=True, audit_file=self.audit_file, assume_yes=True)
        engine = Redrive(self.app, dlq, options, out=lines.append)
        code = engine.run()
        token = secrets.token_urlsafe(16)
        with self._lock:
            self._confirms[token] = _Confirm(dlq.name, reason, self.clock() + CONFIRM_SECONDS)
        return {
            "dlq": dlq.name,
            "reason": reason,
            "code": code,
            "counts": engine.counts,
            "lines": lines,
            "destination": engine.redrive_source.short if engine.redrive_source else None,
            "confirm": token if code == 0 else None,
        }

    def start(self, body: dict[str, Any]) -> Job:
        self._check_allowed()
        dlq, reason = self._dlq(body.get("dlq")), self._reason(body.get("reason"))
        first = _integer(body.get("first", 5), "first", 1, 100)
        rate = None if body.get("rate") in (None, "") else _integer(body.get("rate"), "rate", 1, 500)
        token = body.get("confirm")
        with self._lock:
            confirm = self._confirms.get(token) if isinstance(token, str) else None
            if confirm is None or confirm.expires < self.clock():
                raise Refused(
                    "confirm: run a dry run of this DLQ first; its confirm token starts the redrive", 409
                )
            if (confirm.dlq, confirm.reason) != (dlq.name, reason):
                raise Refused("confirm: the token is for another DLQ or reason: run the dry run again", 409)
            running = [j for j in self.jobs.values() if j.dlq == dlq.name and j.state == "running"]
            if running:
                raise Refused(f"a redrive of {dlq.short} is running (job {running[0].id})", 409)
            del self._confirms[str(token)]
            job = Job(id=secrets.token_hex(6), dlq=dlq.name, reason=reason)
            self.jobs[job.id] = job
        options = RedriveOptions(
            reason=reason,
            first=first,
            rate=rate,
            verify_timeout=self.verify_timeout,
            poll_seconds=self.poll_seconds,
            audit_file=self.audit_file,
            assume_yes=True,
        )

        def sleep(seconds: float) -> None:
            # Where the engine waits is where Ctrl-C reaches the CLI: an abort lands there too.
            if job.aborted.wait(seconds):
                raise KeyboardInterrupt

        engine = Redrive(self.app, dlq, options, out=job.lines.append, sleep=sleep)
        threading.Thread(target=self._run, args=(job, engine), name=f"redrive-{job.id}", daemon=True).start()
        return job

    @staticmethod
    def _run(job: Job, engine: Redrive) -> None:
        try:
            job.code = engine.run()
            job.state = {0: "done", 1: "stopped", 2: "refused"}.get(job.code, "error")
        except Exception as exc:  # AWS refused something: the audit record says so, and so does the page
            job.error = f"{type(exc).__name__}: {exc}"
            job.lines.append(f"error: {job.error}")
            job.state = "error"

    def job(self, job_id: str) -> Job:
        found = self.jobs.get(job_id)
        if found is None:
            raise Refused(f"no redrive job {job_id}", 404)
        return found

    def abort(self, job_id: str) -> Job:
        self._check_allowed()
        job = self.job(job_id)
        if job.state != "running":
            raise Refused(f"job {job_id} has ended ({job.state}): nothing to abort", 409)
        job.aborted.set()
        return job


def _integer(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise Refused(f"{name}: a whole number from {low} to {high}")
    try:
        number = int(value)
    except ValueError:
        raise Refused(f"{name}: a whole number from {low} to {high}, not {value!r}") from None
    if not low <= number <= high:
        raise Refused(f"{name}: a whole number from {low} to {high}, not {number}")
    return number


class Replays:
    """Replay from the console: ``python -m ops replay``'s own code (``ops.lookup.replay``), after a dry
    run (``ops.lookup.plan_replay``: every check the replay makes, nothing written) whose confirm token is
    bound to the operation, the reason and ``force``. Allowed with the redrives (``--allow-redrive``)."""

    def __init__(
        self,
        app: App,
        *,
        allowed: bool,
        audit_file: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.allowed = allowed
        self.audit_file = audit_file
        self.clock = clock
        self._confirms: dict[str, tuple[str, str, bool, float]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _request(body: dict[str, Any]) -> tuple[str, str, bool]:
        operation_id = body.get("operationId")
        if not isinstance(operation_id, str) or not operation_id.strip() or len(operation_id) > 200:
            raise Refused("operationId: the operation to replay is required")
        force = body.get("force", False)
        if not isinstance(force, bool):
            raise Refused("force: true or false")
        return operation_id.strip(), Redrives._reason(body.get("reason")), force

    def dry_run(self, body: dict[str, Any]) -> dict[str, Any]:
        from ops.lookup import ReplayRefused, plan_replay

        if not self.allowed:
            raise Refused(READ_ONLY_REPLAY, 403)
        operation_id, reason, force = self._request(body)
        try:
            plan = plan_replay(self.app, operation_id, force=force)
        except ReplayRefused as refused:
            raise Refused(
                f"refused: {refused}", 404 if str(refused).startswith("no operation") else 409
            ) from None
        token = secrets.token_urlsafe(16)
        with self._lock:
            self._confirms[token] = (operation_id, reason, force, self.clock() + CONFIRM_SECONDS)
        return {**plan.to_json(), "reason": reason, "force": force, "confirm": token}

    def run(self, body: dict[str, Any]) -> dict[str, Any]:
        from ops.lookup import ReplayRefused, replay

        if not self.allowed:
            raise Refused(READ_ONLY_REPLAY, 403)
        operation_id, reason, force = self._request(body)
        token = body.get("confirm")
        with self._lock:
            confirm = self._confirms.get(token) if isinstance(token, str) else None
            if confirm is None or confirm[3] < self.clock():
                raise Refused("confirm: run the replay's dry run first; its confirm token starts it", 409)
            if confirm[:3] != (operation_id, reason, force):
                raise Refused(
                    "confirm: the token is for another operation, reason or force: dry run again", 409
                )
            del self._confirms[str(token)]
        try:
            return replay(self.app, operation_id, reason=reason, force=force, audit_file=self.audit_file)
        except ReplayRefused as refused:  # the operation moved on between the dry run and the confirm
            raise Refused(f"refused: {refused}", 409) from None
