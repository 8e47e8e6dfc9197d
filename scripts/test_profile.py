"""`make test-profile`: where `make test`'s time goes.

Runs the stages of `make test` one after the other (`make test` runs mypy, the template checks and pytest
side by side; here each is timed alone, so its seconds are its own), then prints:

- each stage with its wall seconds;
- pytest by folder: the tests, and the sum of their durations (setup + call + teardown, from pytest's
  JUnit XML). With xdist workers the sums add up to more than the stage's wall time: they ran side by side;
- the 30 slowest test phases, fixtures' setups among them (pytest's --durations).

    .venv/bin/python scripts/test_profile.py [--workers 4]
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAKE = ["make", "--no-print-directory"]
SLOWEST = 30


def stages(workers: int, junit: Path) -> list[tuple[str, list[str]]]:
    pytest = [f"{ROOT}/.venv/bin/python", "-m", "pytest", "-q", "-n", str(workers)]
    return [
        ("check-locks", [*MAKE, "check-locks"]),
        ("lint", [*MAKE, "lint"]),
        ("typecheck", [*MAKE, "typecheck"]),
        ("synth", [*MAKE, "synth"]),
        ("cfn-lint", [*MAKE, "_cfn-lint"]),
        ("checkov", [*MAKE, "_checkov"]),
        ("pytest", [*pytest, f"--durations={SLOWEST}", f"--junitxml={junit}"]),
    ]


def by_folder(junit: Path) -> dict[str, tuple[int, float]]:
    """tests/<folder> -> (tests, seconds summed over them)."""
    counts: collections.Counter[str] = collections.Counter()
    seconds: dict[str, float] = collections.defaultdict(float)
    for case in ET.parse(junit).iter("testcase"):  # noqa: S314 (pytest's own report of this run)
        parts = (case.get("classname") or "").split(".")
        folder = parts[1] if len(parts) > 1 and parts[0] == "tests" else parts[0]
        counts[folder] += 1
        seconds[folder] += float(case.get("time") or 0)
    return {f: (counts[f], seconds[f]) for f in sorted(seconds, key=lambda f: -seconds[f])}


def slowest(output: str) -> list[str]:
    found = re.search(r"=+ slowest \d+ durations =+\n(.*?)(?:\n=|\Z)", output, re.DOTALL)
    return found.group(1).strip().splitlines() if found else []


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--workers", type=int, default=4, help="pytest-xdist workers, as `make test` (0: one process)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        junit = Path(scratch) / "junit.xml"
        timings: list[tuple[str, float, int]] = []
        pytest_output = ""
        for name, command in stages(args.workers, junit):
            print(f"test-profile: {name} ...", flush=True)
            started = time.monotonic()
            result = subprocess.run(  # noqa: S603 (make and this .venv's pytest, fixed arguments)
                command, cwd=ROOT, capture_output=True, text=True, check=False
            )
            timings.append((name, time.monotonic() - started, result.returncode))
            if name == "pytest":
                pytest_output = result.stdout
            if result.returncode != 0:
                sys.stdout.write(result.stdout[-3000:] + result.stderr[-3000:])
        folders = by_folder(junit) if junit.exists() else {}

    print("\n| stage | seconds | exit |\n| --- | ---: | ---: |")
    for name, seconds, code in timings:
        print(f"| {name} | {seconds:.1f} | {code} |")
    print(f"| all, one after the other | {sum(s for _, s, _ in timings):.1f} | |")
    print(f"\npytest by folder ({args.workers} workers: the sums ran side by side)")
    print("| folder | tests | seconds summed |\n| --- | ---: | ---: |")
    for folder, (count, seconds) in folders.items():
        print(f"| tests/{folder} | {count} | {seconds:.1f} |")
    print(f"| all | {sum(c for c, _ in folders.values())} | {sum(s for _, s in folders.values()):.1f} |")
    print(f"\nthe {SLOWEST} slowest test phases (setup is the test's fixtures)")
    for line in slowest(pytest_output):
        print(f"  {line}")
    return max((code for _, _, code in timings), default=0)


if __name__ == "__main__":
    sys.exit(main())
