"""The sandbox bench's CPU accounting (read from /proc): the figures that say how far the 1,000-operation
goal is from what this machine can do, so a wrong field offset must not pass silently."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from emulator.cpu import cpu_seconds

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads Linux /proc")

# Burns CPU until its own CPU clock reaches 0.5 s (CPU time, not wall-clock), says so, then idles.
_BURN = """
import sys, time
while time.process_time() < 0.5:
    pass
print("burnt", flush=True)
time.sleep(60)
"""


def test_cpu_is_attributed_to_the_emulator_the_glue_and_the_other_descendants() -> None:
    emulator = subprocess.Popen([sys.executable, "-c", _BURN], stdout=subprocess.PIPE, text=True)
    worker = subprocess.Popen([sys.executable, "-c", _BURN], stdout=subprocess.PIPE, text=True)
    try:
        assert emulator.stdout is not None and worker.stdout is not None
        assert emulator.stdout.readline().strip() == "burnt"
        assert worker.stdout.readline().strip() == "burnt"
        glue_started = time.process_time()
        while time.process_time() - glue_started < 0.3:
            pass
        cpu = cpu_seconds(os.getpid(), emulator.pid)
    finally:
        for process in (emulator, worker):
            process.kill()
            process.wait()
    # /proc counts user and system time in whole ticks, each truncated: up to a tick short of each.
    tick = 1 / os.sysconf("SC_CLK_TCK")
    assert cpu["emulator"] >= 0.5 - 2 * tick
    assert cpu["workers"] >= 0.5 - 2 * tick  # the other child, not the emulator counted twice
    # This process's own ticks (time.process_time() may be a few ticks ahead of /proc's count).
    assert cpu["glue"] >= time.process_time() - 5 * tick


def test_an_unknown_emulator_pid_counts_nothing_for_it() -> None:
    cpu = cpu_seconds(os.getpid(), -1)
    assert cpu["emulator"] == 0.0
    assert cpu["all"] >= cpu["glue"] > 0
