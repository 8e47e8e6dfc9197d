"""The embedded AWS emulator: a moto server on loopback, started and stopped by the sandbox.

moto runs in its own process (not a thread of the sandbox) so that its request handling does not
share a GIL with the event source mappings and the HTTP API: on a 2-core machine that is the
difference between the emulator and the glue taking turns and running side by side.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REGION = "us-east-1"
# moto's default account; every ARN the sandbox builds uses it so ARNs match what moto returns.
ACCOUNT_ID = "123456789012"
DUMMY_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


def aws_env(endpoint: str) -> dict[str, str]:
    """Environment that points boto3 and the AWS CLI at the emulator with dummy credentials."""
    return {
        **DUMMY_CREDENTIALS,
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_ENDPOINT_URL": endpoint,
        # Without it, botocore derives account-based DynamoDB endpoints that bypass AWS_ENDPOINT_URL
        # handling in moto and DynamoDB streams stop working.
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    }


# What the managed glue's own calls carry in their User-Agent (an event source mapping polls with its
# function's role, as Lambda does): emulator.request_meter tells AWS's side of the bill from the code's.
GLUE_AGENT = "relay-glue"


def client(
    service: str, endpoint: str | None, *, access_key_id: str | None = None, glue: str | None = None
) -> Any:
    """A boto3 client on the emulator (the sandbox's own calls: provisioning, polling, status).
    ``access_key_id`` signs as a function instead (``emulator.iam.access_key_for``): an event source
    mapping polls with its function's execution role, as Lambda's does, so IAM applies to it.
    ``endpoint=None`` keeps boto3's own AWS endpoints: the handler tests provision the templates into
    moto's in-process ``mock_aws``, which answers those. ``glue`` names the piece of managed glue the
    client plays (``esm``), sent as ``relay-glue/<glue>`` in the User-Agent."""
    import boto3
    from botocore.config import Config

    return boto3.client(  # type: ignore[call-overload]  # the service is a parameter
        service,
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=access_key_id or DUMMY_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=DUMMY_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        # Long polls hold a connection for up to 20 s; many pollers need more than the default 10.
        config=Config(
            retries={"mode": "standard", "max_attempts": 3},
            max_pool_connections=50,
            read_timeout=30,
            user_agent_extra=f"{GLUE_AGENT}/{glue}" if glue else None,
        ),
    )


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """Linux: have the kernel SIGTERM the emulator when the sandbox dies, even on SIGKILL."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, 15)  # PR_SET_PDEATHSIG, SIGTERM
    except (OSError, AttributeError):
        pass


# moto's BaseModel records every model instance it ever creates (for its /moto-api dashboard),
# including the deep copy of each received SQS message and every DynamoDB shard iterator; under a
# steady load that is a leak of ~30 MB/s, and the garbage collector then eats the emulator's CPU.
# The sandbox does not use the dashboard, so the emulator runs with the tracking switched off.
_MOTO_MAIN = """
import sys
from emulator.moto_patches import install_for_server
install_for_server()
from emulator.limits import install as refuse_what_aws_refuses
refuse_what_aws_refuses()
from emulator.sqs_admin import install as serve_queue_ages
serve_queue_ages()
from emulator.cloudformation import install as describe_provisioned_stacks
describe_provisioned_stacks()
from emulator.traces import install as collect_traces
collect_traces()
from emulator.iam_enforcer import install as enforce_iam
enforce_iam()
from emulator.bus_delivery import install as deliver_bus_events
deliver_bus_events()
from emulator.request_meter import install as meter_requests
meter_requests()
from emulator.aws_faults import install as inject_faults
inject_faults()
from moto.server import main
sys.argv[0] = "moto_server"
main(sys.argv[1:])
"""


class EmulatorError(RuntimeError):
    """The emulator could not be started."""


class Emulator:
    """``moto.server`` as a child process on 127.0.0.1:<port>."""

    def __init__(self, port: int = 4566, *, log_path: Path | None = None) -> None:
        self.port = port
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def pid(self) -> int | None:
        """The moto server's process id while it runs (the bench reads its CPU time)."""
        return self._process.pid if self._process is not None and self._process.poll() is None else None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> str:
        if not port_is_free(self.port):
            raise EmulatorError(
                f"port {self.port} is already in use; is another sandbox running? "
                f"Stop it or pick another port with --emulator-port."
            )
        env = {**os.environ, **aws_env(self.endpoint)}
        env.pop("AWS_ENDPOINT_URL", None)
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = self.log_path.open("ab")
        self._process = subprocess.Popen(
            [sys.executable, "-c", _MOTO_MAIN, "-H", "127.0.0.1", "-p", str(self.port)],
            env=env,
            cwd=ROOT,  # so `import emulator.moto_patches` resolves whatever directory the user is in
            stdout=self._log or subprocess.DEVNULL,
            stderr=subprocess.STDOUT if self._log else subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise EmulatorError(
                    f"moto server exited with code {self._process.returncode}; see {self.log_path}"
                )
            try:
                with urllib.request.urlopen(f"{self.endpoint}/moto-api/data.json", timeout=1):
                    return self.endpoint
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise EmulatorError(f"moto server did not answer on {self.endpoint} within {timeout:.0f} s")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        if self._log is not None:
            self._log.close()
            self._log = None
