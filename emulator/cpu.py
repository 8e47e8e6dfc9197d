"""CPU seconds by part of the sandbox, read from /proc (Linux): where a run's time goes.

``cpu_seconds(root, emulator)`` splits the CPU of ``root`` and its descendants into the moto server
(``emulator``: one GIL-bound process, so at most one core), ``glue`` (``root`` itself: the mappings,
the HTTP API, the fakes and whatever client drives the run), and ``workers`` (every other
descendant: the zygote and the Lambda execution environments). Used by ``bench/sandbox_bench.py`` and
``python -m local chaos``.
"""

from __future__ import annotations

import os
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _process_table() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds of the process and of its reaped children)."""
    table: dict[int, tuple[int, float]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # exited meanwhile
        fields = text[text.rindex(")") + 2 :].split()
        # after "pid (comm) ": state ppid ... utime(12) stime(13) cutime(14) cstime(15), 1-based in proc(5)
        ticks = sum(int(f) for f in fields[11:15])
        table[int(text.split(" ", 1)[0])] = (int(fields[1]), ticks / _TICKS)
    return table


def cpu_seconds(root: int, emulator: int) -> dict[str, float]:
    """CPU seconds so far: ``emulator`` (the moto server), ``glue`` (``root``: this process, which runs
    the sandbox's mappings, HTTP API and fakes as well as the bench client), ``workers`` (every other
    descendant: the zygote and the Lambda execution environments) and ``all``."""
    table = _process_table()
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        total += table.get(pid, (0, 0.0))[1]
        stack.extend(children.get(pid, []))
    emulator_cpu = table.get(emulator, (0, 0.0))[1]
    glue = table.get(root, (0, 0.0))[1]
    return {"all": total, "emulator": emulator_cpu, "glue": glue, "workers": total - emulator_cpu - glue}
