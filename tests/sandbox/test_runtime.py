"""The local Lambda runtime's execution environments, forked from the zygote or started fresh: each
sees only its function's environment and code, is warm between invocations, is killed on timeout,
and nothing outlives the runtime."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from emulator.provision import FunctionSpec
from emulator.runtime import Runtime

HANDLER = """
import os, sys, time

LOADED_AT = time.time()
CALLS = []


def handler(event, context):
    CALLS.append(event)
    if event.get("sleep"):
        time.sleep(event["sleep"])
    if event.get("allocateMb"):
        blob = b"\x01" * (event["allocateMb"] << 20)  # written, so resident
        del blob
    print("invoked", len(CALLS), flush=True)
    return {
        "pid": os.getpid(),
        "calls": len(CALLS),
        "loadedAt": LOADED_AT,
        "greeting": os.environ.get("GREETING"),
        "sandboxOnly": os.environ.get("RELAY_TEST_PARENT_ONLY"),
        "cwd": os.getcwd(),
        "codeFirst": sys.path[0],
        "remainingMs": context.get_remaining_time_in_millis(),
    }
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"


@pytest.fixture(params=["zygote", "fresh interpreter"])
def runtime(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Runtime:
    monkeypatch.setenv("RELAY_TEST_PARENT_ONLY", "leaked")
    if request.param != "zygote":
        monkeypatch.setenv("RELAY_LOCAL_NO_ZYGOTE", "1")
    rt = probe_runtime(tmp_path, memory=1024)
    assert (rt.zygote is not None) == (request.param == "zygote")
    request.addfinalizer(rt.close)
    return rt


def probe_runtime(tmp_path: Path, *, memory: int) -> Runtime:
    code = tmp_path / "code"
    code.mkdir()
    (code / "probe.py").write_text(HANDLER)
    spec = FunctionSpec(
        name="relay-test-probe",
        logical_id="Probe",
        stack="test",
        handler="probe.handler",
        code_dir=code,
        layer_dirs=[],
        environment={"GREETING": "hello"},
        timeout=2,
        memory=memory,
        arn="arn:aws:lambda:us-east-1:123456789012:function:relay-test-probe",
    )
    return Runtime(
        {spec.name: spec},
        endpoint="http://127.0.0.1:9",
        log_dir=tmp_path / "logs",
        max_workers=2,
        env_overrides={},
    )


def test_an_environment_sees_its_function_only_stays_warm_and_is_replaced_after_a_timeout(
    runtime: Runtime, tmp_path: Path
) -> None:
    first = runtime.invoke("relay-test-probe", {"n": 1})
    assert first.ok, first.error_message
    body = first.payload
    assert body["greeting"] == "hello"
    assert body["sandboxOnly"] is None  # the sandbox's own environment does not leak in
    assert body["codeFirst"] == str(tmp_path / "code")
    assert body["cwd"] == str(Path(__file__).resolve().parents[2])
    assert 0 < body["remainingMs"] <= 2000
    warm = runtime.invoke("relay-test-probe", {"n": 2}).payload
    assert (warm["pid"], warm["calls"]) == (body["pid"], 2)  # the same warm environment

    timed_out = runtime.invoke("relay-test-probe", {"sleep": 5})
    assert timed_out.timed_out
    deadline = time.time() + 5
    while alive(body["pid"]) and time.time() < deadline:
        time.sleep(0.05)
    assert not alive(body["pid"])  # killed, as Lambda discards a timed-out environment

    cold = runtime.invoke("relay-test-probe", {"n": 3}).payload
    assert cold["pid"] != body["pid"]
    assert cold["calls"] == 1 and cold["loadedAt"] > body["loadedAt"]  # the handler module ran again
    log = (tmp_path / "logs" / "relay-test-probe.log").read_text()
    assert "invoked 2" in log and "invoked 1" in log


def test_nothing_outlives_the_runtime(runtime: Runtime) -> None:
    pid = runtime.invoke("relay-test-probe", {}).payload["pid"]
    zygote = runtime.zygote.process.pid if runtime.zygote else None
    runtime.close()
    deadline = time.time() + 5
    while (alive(pid) or (zygote and alive(zygote))) and time.time() < deadline:
        time.sleep(0.05)
    assert not alive(pid)
    assert zygote is None or not alive(zygote)


def test_a_crash_kills_the_environment_mid_invocation_and_the_next_one_cold_starts(runtime: Runtime) -> None:
    from emulator.runtime import CRASH_ERROR

    first = runtime.invoke("relay-test-probe", {"n": 1})
    assert first.ok
    function = runtime.functions["relay-test-probe"]
    function.mean_duration = 0.5  # the kill lands 0.1-0.5 s in, while the handler sleeps for 1 s
    runtime.crashes.set(1.0, seed=3)
    crashed = runtime.invoke("relay-test-probe", {"sleep": 1.0})
    runtime.crashes.set(0.0)
    assert not crashed.ok and crashed.error_type == CRASH_ERROR
    assert "signal: killed" in crashed.error_message
    assert runtime.crashes.kills == {"relay-test-probe": 1}
    for _ in range(50):
        if not alive(first.payload["pid"]):
            break
        time.sleep(0.05)
    assert not alive(first.payload["pid"])
    after = runtime.invoke("relay-test-probe", {"n": 2})
    assert after.ok and after.payload["pid"] != first.payload["pid"] and after.payload["calls"] == 1


def test_crash_draws_are_seeded_and_a_rate_must_be_a_probability() -> None:
    from emulator.runtime import Crashes

    def draws(seed: int) -> list[float | None]:
        crashes = Crashes(0.5, seed=seed)
        return [crashes.draw(1.0) for _ in range(40)]

    assert draws(5) == draws(5) != draws(6)
    assert any(d is None for d in draws(5)) and any(d is not None for d in draws(5))
    assert all(d is None or 0.2 <= d <= 1.0 for d in draws(5))
    assert Crashes().draw(1.0) is None
    with pytest.raises(ValueError, match="probability"):
        Crashes(1.5)


def test_memory_is_the_environments_own_peak_not_the_peak_of_the_process_that_started_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fresh interpreter is forked and exec'd from this process; ru_maxrss survives an exec, so an
    # environment used to read this process's peak (a test runner at 1 GB: every call OutOfMemory).
    monkeypatch.setenv("RELAY_LOCAL_NO_ZYGOTE", "1")
    ballast = b"\x01" * (200 << 20)  # this process's peak is now above the function's 128 MB
    rt = probe_runtime(tmp_path, memory=128)
    try:
        small = rt.invoke("relay-test-probe", {"n": 1})
        assert small.ok, small.error_message
        big = rt.invoke("relay-test-probe", {"allocateMb": 160})
        assert not big.ok and big.error_type == "Runtime.OutOfMemory", big
        assert "exceeded MemorySize 128 MB" in big.error_message
        again = rt.invoke("relay-test-probe", {"n": 2})
        assert again.ok and again.payload["pid"] != small.payload["pid"]  # the killed one was replaced
    finally:
        rt.close()
        del ballast
