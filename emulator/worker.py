"""One local Lambda execution environment: import the handler once, then serve invocations.

Started by ``emulator.runtime`` as ``python -m emulator.worker <request-fd> <response-fd>`` with the
function's environment. Like Lambda, module-level code (clients, Powertools setup) runs once at the
cold start and stays warm between invocations; the handler's own stdout/stderr (Powertools JSON
logs, EMF metrics) go to the function's log file, and the invocation protocol uses two private
pipes so nothing the handler prints can corrupt it.
"""

from __future__ import annotations

import importlib
import json
import os
import resource
import sys
import time
import traceback
import uuid
from multiprocessing.connection import Connection
from typing import Any


class LambdaContext:
    """The attributes of Lambda's context object that handlers and Powertools read."""

    def __init__(self, request_id: str, deadline: float) -> None:
        self.function_name = os.environ["AWS_LAMBDA_FUNCTION_NAME"]
        self.function_version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        self.invoked_function_arn = os.environ.get("RELAY_LOCAL_FUNCTION_ARN", "")
        self.memory_limit_in_mb = int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"))
        self.aws_request_id = request_id
        self.log_group_name = os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
        self.log_stream_name = os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME", "")
        self.identity = None
        self.client_context = None
        self._deadline = deadline

    def get_remaining_time_in_millis(self) -> int:
        return max(int((self._deadline - time.time()) * 1000), 0)


def _load_handler(spec: str) -> Any:
    module_name, _, function_name = spec.rpartition(".")
    module = importlib.import_module(module_name)
    return getattr(module, function_name)


def _peak_rss_mb() -> float:
    """This process's peak resident set size. Linux's VmHWM is this address space's own high-water
    mark; ``ru_maxrss`` is not: it survives an exec, so an interpreter forked and exec'd from a test
    runner at 1 GB reads 1 GB before it has allocated anything."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    requests = Connection(int(sys.argv[1]), writable=False)
    responses = Connection(int(sys.argv[2]), readable=False)
    # Lambda's sys.path order: the function code, then the layers, then the runtime's packages.
    paths = [p for p in os.environ.get("RELAY_LOCAL_PATH", "").split(os.pathsep) if p]
    sys.path[:0] = paths
    init_error: dict[str, Any] | None = None
    handler: Any = None
    try:
        handler = _load_handler(os.environ["_HANDLER"])
    except Exception as exc:  # an import error is reported on every invocation, as Lambda does
        init_error = {
            "errorType": "Runtime.ImportModuleError",
            "errorMessage": f"{type(exc).__name__}: {exc}",
        }
        traceback.print_exc()
    memory_mb = int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"))
    while True:
        try:
            raw = requests.recv_bytes()
        except EOFError:
            return 0
        request = json.loads(raw)
        if init_error is not None:
            responses.send_bytes(json.dumps({"ok": False, **init_error}).encode())
            continue
        context = LambdaContext(request.get("requestId") or str(uuid.uuid4()), request["deadline"])
        try:
            result = handler(request["event"], context)
            reply: dict[str, Any] = {"ok": True, "result": result}
        except Exception as exc:
            traceback.print_exc()
            reply = {"ok": False, "errorType": type(exc).__name__, "errorMessage": str(exc)}
        sys.stdout.flush()
        sys.stderr.flush()
        # Lambda kills an environment that exceeds its memory; peak RSS is the closest local measure.
        peak_mb = _peak_rss_mb()
        if peak_mb > memory_mb:
            reply = {
                "ok": False,
                "errorType": "Runtime.OutOfMemory",
                "errorMessage": f"peak memory {peak_mb:.0f} MB exceeded MemorySize {memory_mb} MB",
                "exit": True,
            }
        try:
            payload = json.dumps(reply, default=str).encode()
        except (TypeError, ValueError) as exc:
            payload = json.dumps(
                {"ok": False, "errorType": "Runtime.MarshalError", "errorMessage": str(exc)}
            ).encode()
        responses.send_bytes(payload)
        if reply.get("exit"):
            return 1


if __name__ == "__main__":
    sys.exit(main())
