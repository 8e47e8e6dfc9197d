"""Worker zygote: forks the sandbox's Lambda execution environments from one warm process.

A cold ``emulator.worker`` spent about a second of CPU importing the same libraries every function uses
(boto3/botocore, pydantic, Powertools' batch and logging) before its handler module; a demo starts
thirty-odd of them on two cores. The zygote imports those libraries once and forks each new
environment from itself: the child takes the function's environment variables, working directory and
log file, then runs ``emulator.worker``'s loop, which imports the handler module (and the function's own
code and layers) fresh, as a cold start does. Only third-party modules that read no configuration at
import time are preloaded, so what a function sees is the same as with a fresh interpreter.

Protocol, over a Unix socket pair: the zygote says ``{"ready": true}`` once it has preloaded; then the
sandbox sends ``{"env": {...}}`` with three file descriptors (request pipe, response pipe, log file),
and the zygote answers ``{"pid": N}``. Children inherit its working directory, the project root. It reaps its
children itself, and exits when the socket closes (the sandbox stopped); its children are asked to
exit with it (PR_SET_PDEATHSIG), as the zygote is with the sandbox.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from typing import Any

PRELOAD = (
    "boto3",
    "botocore.client",
    "botocore.config",
    "botocore.session",
    "boto3.dynamodb.types",
    "s3transfer.manager",
    "urllib3",
    "pydantic",
    "aws_lambda_powertools.utilities.batch",
    "aws_lambda_powertools.utilities.typing",
    "aws_lambda_powertools.logging",
    "aws_lambda_powertools.metrics",
)
MAX_MESSAGE = 1 << 20  # an environment of a few hundred variables fits many times over


def preload() -> None:
    """A module that is missing is simply not preloaded: the worker imports what it needs anyway."""
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def _child(message: dict[str, Any], fds: list[int], control: socket.socket) -> None:
    from emulator.server import _die_with_parent

    control.close()
    _die_with_parent()
    request_read, response_write, log_fd = fds
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    os.environ.clear()
    os.environ.update(message["env"])
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    from emulator import worker

    sys.argv = ["emulator.worker", str(request_read), str(response_write)]
    code = 1
    try:
        code = worker.main()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve(control: socket.socket) -> None:
    # Children are reaped by the kernel; the sandbox watches them through pidfds.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    while True:
        try:
            raw, fds, _flags, _addr = socket.recv_fds(control, MAX_MESSAGE, 3)
        except OSError:
            return
        if not raw:
            return
        try:
            pid = os.fork()
        except OSError as exc:
            for fd in fds:
                os.close(fd)
            control.sendall(json.dumps({"error": str(exc)}).encode())
            continue
        if pid == 0:
            _child(json.loads(raw), list(fds), control)
        for fd in fds:
            os.close(fd)
        control.sendall(json.dumps({"pid": pid}).encode())


def main() -> int:
    control = socket.socket(fileno=int(sys.argv[1]))
    preload()
    control.sendall(json.dumps({"ready": True}).encode())
    serve(control)
    return 0


if __name__ == "__main__":
    sys.exit(main())
