"""The local Lambda runtime: warm worker processes per function, timeouts enforced from outside.

Each function gets a pool of execution environments (``emulator.worker`` processes) created on demand
up to a concurrency cap, and reused warm, like Lambda reuses environments. The parent enforces the
function's ``Timeout``: a worker that has not answered in time is killed (its in-flight work is
lost, exactly as when Lambda freezes and discards a timed-out environment) and the next invocation
cold-starts a new one.
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from emulator.iam import access_key_for
from emulator.provision import FunctionSpec
from emulator.server import _die_with_parent, aws_env

# The directory the ``emulator`` package imports from: the zygote and the workers run from it.
PACKAGE_ROOT = Path(__file__).resolve().parent.parent


@dataclass
class InvokeResult:
    ok: bool
    payload: Any = None
    error_type: str = ""
    error_message: str = ""
    duration: float = 0.0

    @property
    def timed_out(self) -> bool:
        return self.error_type == "Sandbox.Timeout"


class Zygote:
    """The parent's end of ``emulator.zygote``: one warm process that forks execution environments."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "emulator.zygote", str(theirs.fileno())],
            env={**os.environ, "PYTHONPATH": str(PACKAGE_ROOT)},
            cwd=str(PACKAGE_ROOT),
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
        theirs.close()
        self._socket = ours
        self._lock = threading.Lock()
        ours.settimeout(60)
        try:
            hello = json.loads(ours.recv(65536) or b"{}")
        except (OSError, ValueError) as exc:
            self.close()
            raise RuntimeError(f"the worker zygote did not start: {exc}") from exc
        if not hello.get("ready"):
            self.close()
            raise RuntimeError("the worker zygote did not start")
        ours.settimeout(30)

    def fork(self, env: dict[str, str], fds: tuple[int, int, int]) -> int:
        message = json.dumps({"env": env}).encode()  # the zygote (and so the child) runs in PACKAGE_ROOT
        with self._lock:
            socket.send_fds(self._socket, [message], list(fds))
            reply = json.loads(self._socket.recv(65536) or b"{}")
        if "pid" not in reply:
            raise OSError(f"the worker zygote could not fork: {reply.get('error', 'no answer')}")
        return int(reply["pid"])

    def close(self) -> None:
        self._socket.close()  # the zygote's EOF: it exits, and its children with it
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


class _Forked:
    """A zygote's child, watched through a pidfd (the sandbox is not its parent): the subset of
    ``subprocess.Popen`` that ``_Worker`` uses."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except ProcessLookupError:  # already gone
            self._pidfd = None

    def poll(self) -> int | None:
        if self._pidfd is None:
            return 0
        if select.select([self._pidfd], [], [], 0)[0]:
            self._release()
            return 0
        return None

    def kill(self) -> None:
        if self._pidfd is not None:
            try:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def wait(self, timeout: float | None = None) -> int:
        if self._pidfd is not None and not select.select([self._pidfd], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0)
        self._release()
        return 0

    def _release(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


class _Worker:
    def __init__(
        self, spec: FunctionSpec, env: dict[str, str], log_file: Any, zygote: Zygote | None = None
    ) -> None:
        request_read, request_write = os.pipe()
        response_read, response_write = os.pipe()
        forked: _Forked | None = None
        if zygote is not None:
            try:
                forked = _Forked(zygote.fork(env, (request_read, response_write, log_file.fileno())))
            except OSError:
                forked = None  # a fresh interpreter instead
        self.process: subprocess.Popen[bytes] | _Forked = forked or subprocess.Popen(
            [sys.executable, "-m", "emulator.worker", str(request_read), str(response_write)],
            env=env,
            cwd=str(PACKAGE_ROOT),
            pass_fds=(request_read, response_write),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )
        os.close(request_read)
        os.close(response_write)
        self.requests = Connection(request_write, readable=False)
        self.responses = Connection(response_read, writable=False)

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=5)
        self.requests.close()
        self.responses.close()

    def close(self) -> None:
        # Closing the request pipe is the worker's EOF: it exits its loop on its own.
        self.requests.close()
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
        self.responses.close()


_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="worker-spawner")

CRASH_ERROR = "Runtime.ExitError"


class Crashes:
    """Chaos switch: SIGKILL an execution environment in the middle of a share of the invocations.

    For a drawn invocation the parent waits a random part of the function's recent mean duration and
    then kills the worker (an invocation that answers first is not killed, and not counted). What
    follows is what Lambda does with a crashed environment: the invocation fails with
    ``Runtime.ExitError`` and its effects so far stay done; the next invocation cold-starts; an event
    source mapping leaves the batch to come back after its visibility timeout (a stream retries it);
    the HTTP API answers 500. ``kills`` counts the environments killed, by function."""

    def __init__(self, rate: float = 0.0, *, seed: int | None = None) -> None:
        self.kills: dict[str, int] = {}
        self._lock = threading.Lock()
        self.set(rate, seed=seed)

    def set(self, rate: float, *, seed: int | None = None) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"crash rate {rate} is not a probability from 0 to 1")
        with self._lock:
            self.rate = rate
            self._draws = random.Random(seed)

    def draw(self, mean_duration: float) -> float | None:
        """Seconds into the invocation to kill it, or None to leave it alone."""
        if self.rate <= 0.0:
            return None
        with self._lock:
            if self._draws.random() >= self.rate:
                return None
            return self._draws.uniform(0.2, 1.0) * max(mean_duration, 0.01)

    def killed(self, function: str) -> None:
        with self._lock:
            self.kills[function] = self.kills.get(function, 0) + 1


class FunctionRuntime:
    """A pool of warm workers for one function."""

    def __init__(
        self,
        spec: FunctionSpec,
        *,
        endpoint: str,
        log_dir: Path,
        max_workers: int,
        env_overrides: dict[str, str],
        zygote: Zygote | None = None,
        crashes: Crashes | None = None,
    ) -> None:
        self.spec = spec
        self.zygote = zygote
        self.crashes = crashes or Crashes()
        self.mean_duration = 0.1  # seconds, a moving mean of the completed invocations
        self.max_workers = max_workers
        self._idle: list[_Worker] = []
        self._count = 0
        self._cond = threading.Condition()
        self._closed = False
        self.invocations = 0
        self.errors = 0
        self.timeouts = 0
        self.cold_starts = 0
        self.busy_seconds = 0.0  # summed duration of the invocations that answered
        log_dir.mkdir(parents=True, exist_ok=True)
        self._log = (log_dir / f"{spec.name}.log").open("ab")
        paths = [str(spec.code_dir), *(str(d) for d in spec.layer_dirs)]
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/tmp"),
            "LANG": "C.UTF-8",
            "TZ": "UTC",
            # The sandbox's own package (emulator.worker) must import; the function's paths go first.
            "PYTHONPATH": str(PACKAGE_ROOT),
            "PYTHONUNBUFFERED": "1",
            **aws_env(endpoint),
            # Its own credentials: the emulator authorizes every call against the function's role.
            "AWS_ACCESS_KEY_ID": access_key_for(spec.name),
            "AWS_LAMBDA_FUNCTION_NAME": spec.name,
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory),
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{spec.name}",
            "AWS_LAMBDA_LOG_STREAM_NAME": "local",
            "AWS_EXECUTION_ENV": "AWS_Lambda_python_local",
            "LAMBDA_TASK_ROOT": str(spec.code_dir),
            "_HANDLER": spec.handler,
            "RELAY_LOCAL_FUNCTION_ARN": spec.arn,
            "RELAY_LOCAL_PATH": os.pathsep.join(paths),
            # Spans go to AWS_ENDPOINT_URL + /v1/traces: the emulator's collector (emulator.traces).
            **spec.environment,
            **env_overrides,
        }

    def _acquire(self) -> _Worker:
        with self._cond:
            while True:
                if self._closed:
                    raise RuntimeError(f"function {self.spec.name} is shut down")
                while self._idle:
                    worker = self._idle.pop()
                    if worker.alive():
                        return worker
                    self._count -= 1
                if self._count < self.max_workers:
                    self._count += 1
                    break
                # All environments busy: wait, as the mapping's poller would be throttled.
                self._cond.wait()
        self.cold_starts += 1
        try:
            # PR_SET_PDEATHSIG fires when the *thread* that forked the worker exits, not the process:
            # a worker spawned from a short-lived HTTP request thread would be killed after its first
            # invocation. Every worker is therefore spawned from the runtime's one long-lived thread.
            return _SPAWNER.submit(_Worker, self.spec, self.env, self._log, self.zygote).result()
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise

    def _release(self, worker: _Worker | None) -> None:
        with self._cond:
            if worker is None or self._closed:
                self._count -= 1
                if worker is not None:
                    worker.close()
            else:
                self._idle.append(worker)
            self._cond.notify()

    def invoke(self, event: Any) -> InvokeResult:
        worker = self._acquire()
        started = time.monotonic()
        self.invocations += 1
        request = {
            "event": event,
            "requestId": str(uuid.uuid4()),
            "deadline": time.time() + self.spec.timeout,
        }
        crash_at = self.crashes.draw(self.mean_duration)
        try:
            worker.requests.send_bytes(json.dumps(request).encode())
            if crash_at is not None and not worker.responses.poll(min(crash_at, self.spec.timeout)):
                worker.kill()
                self._release(None)
                self.errors += 1
                self.crashes.killed(self.spec.name)
                return InvokeResult(
                    False,
                    error_type=CRASH_ERROR,
                    error_message="RequestId: "
                    + request["requestId"]
                    + " Error: Runtime exited with error: signal: killed (chaos)",
                    duration=time.monotonic() - started,
                )
            if not worker.responses.poll(self.spec.timeout - (time.monotonic() - started)):
                worker.kill()
                self._release(None)
                self.errors += 1
                self.timeouts += 1
                return InvokeResult(
                    False,
                    error_type="Sandbox.Timeout",
                    error_message=f"Task timed out after {self.spec.timeout} seconds",
                    duration=time.monotonic() - started,
                )
            reply = json.loads(worker.responses.recv_bytes())
        except (EOFError, OSError, BrokenPipeError) as exc:
            worker.kill()
            self._release(None)
            self.errors += 1
            return InvokeResult(False, error_type="Runtime.ExitError", error_message=f"worker died: {exc}")
        duration = time.monotonic() - started
        self.busy_seconds += duration
        self.mean_duration = 0.9 * self.mean_duration + 0.1 * duration
        if not worker.alive() or reply.get("exit"):
            worker.kill()
            self._release(None)
        else:
            self._release(worker)
        if reply.get("ok"):
            return InvokeResult(True, payload=reply.get("result"), duration=duration)
        self.errors += 1
        return InvokeResult(
            False,
            error_type=str(reply.get("errorType", "")),
            error_message=str(reply.get("errorMessage", "")),
            duration=duration,
        )

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._cond.notify_all()
        for worker in idle:
            worker.close()
        self._log.close()


class Runtime:
    """Every function of the topology, by name. Execution environments are forked from one warm
    zygote (``emulator.zygote``); ``RELAY_LOCAL_NO_ZYGOTE=1``, or a zygote that fails, starts each one
    as a fresh interpreter instead."""

    def __init__(
        self,
        functions: dict[str, FunctionSpec],
        *,
        endpoint: str,
        log_dir: Path,
        max_workers: int,
        env_overrides: dict[str, dict[str, str]],
        crashes: Crashes | None = None,
    ) -> None:
        self.crashes = crashes or Crashes()
        # Called after every invocation with (function, ok): what Lambda reports to CloudWatch.
        self.on_invoke: Callable[[str, bool], None] | None = None
        self.zygote: Zygote | None = None
        if functions and os.environ.get("RELAY_LOCAL_NO_ZYGOTE") != "1":
            try:
                # From the spawner thread: the zygote's parent-death signal follows the thread that
                # started it, as the workers' does.
                self.zygote = _SPAWNER.submit(Zygote).result()
            except (OSError, RuntimeError):
                self.zygote = None
        self.functions = {
            name: FunctionRuntime(
                spec,
                endpoint=endpoint,
                log_dir=log_dir,
                max_workers=max_workers,
                env_overrides=env_overrides.get(name, {}),
                zygote=self.zygote,
                crashes=self.crashes,
            )
            for name, spec in functions.items()
        }

    def invoke(self, name: str, event: Any) -> InvokeResult:
        result = self.functions[name].invoke(event)
        if self.on_invoke is not None:
            self.on_invoke(name, result.ok)  # Lambda's Invocations and Errors metrics
        return result

    def close(self) -> None:
        for function in self.functions.values():
            function.close()
        if self.zygote is not None:
            self.zygote.close()
