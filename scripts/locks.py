"""Lock files for every requirements set: `make lock` writes them, `make check-locks` (`make test`) checks.

Each `requirements*.txt` at the root, and the dependency layer's `layers/dependencies/requirements.txt`, has
a lock beside it (`.txt` -> `.lock`): every package of its resolution pinned, with the sha256 of each of
the version's distributions. The Makefile installs `.venv` from the locks and the layer is built from its
lock, both with `--require-hashes`, so what the tests ran on is what Lambda loads.

- `requirements-dev.txt` is resolved first; every set it includes (the sandbox's, the CDK app's, the
  layer's) is then resolved with the dev lock as constraints, so a package has one version in all of
  them: `.venv` (sandbox lock, then dev lock, installed in two steps) and the arm64 layer agree.
  A set the dev set does not include (e.g. `requirements-checkov.txt`) is resolved on its own.
- The root sets are resolved for Linux (CI and the sandbox), the layer for arm64 Lambda
  (`aarch64-manylinux2014`, wheels only), both for Python 3.13 (the Lambda runtime's).
- Each lock's header records the sha256 of every input file (the set, what it includes, and for a
  constrained set the dev set's files) and the resolution. `check` recomputes them and compares the
  `==` pins of each set with its lock and the locks with each other: offline, in milliseconds, with no
  third-party import (any Python 3 runs it).

    python scripts/locks.py lock [--upgrade]   # needs the package index; --upgrade takes newer versions
    python scripts/locks.py check [LOCK ...]   # exit 1, naming the file, when a set and its lock disagree
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON_VERSION = "3.13"
DEV = "requirements-dev.txt"
LAYER = "layers/dependencies/requirements.txt"
LAYER_PLATFORM = "aarch64-manylinux2014"  # infra/constructs/layers.py: pip's manylinux2014_aarch64
ROOT_PLATFORM = "linux"
COMPILE_COMMAND = "make lock"
INPUTS_TITLE = "# Inputs (`make check-locks` compares them; after editing one, run `make lock`):"

_INCLUDE = re.compile(r"^(-r|--requirement|-c|--constraint)(?:\s+|=)(\S+)$")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*==\s*([^\s;,]+)\s*(?:;.*)?$")
_LOCKED = re.compile(r"^([a-z0-9][a-z0-9._-]*)==(\S+)")
_RECORDED = re.compile(r"^#    (\S+) sha256:([0-9a-f]{64})$")
_RESOLUTION = re.compile(r"^#    resolution: (.+)$")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _lines(path: Path) -> list[str]:
    """The requirement lines of a file: comments stripped, continuations joined."""
    text = path.read_text().replace("\\\n", " ")
    lines = (re.sub(r"(^|\s)#.*$", "", line).strip() for line in text.splitlines())
    return [line for line in lines if line]


def _includes(path: Path) -> list[tuple[str, Path]]:
    found = []
    for line in _lines(path):
        match = _INCLUDE.match(line)
        if match:
            kind = "-c" if match[1] in ("-c", "--constraint") else "-r"
            found.append((kind, (path.parent / match[2]).resolve()))
    return found


def _closure(path: Path) -> list[Path]:
    """The file and every file it includes (-r or -c), recursively, each once."""
    seen: list[Path] = []
    todo = [path.resolve()]
    while todo:
        current = todo.pop(0)
        if current not in seen:
            seen.append(current)
            todo.extend(included for _, included in _includes(current))
    return seen


def _pins(path: Path) -> dict[str, tuple[str, Path]]:
    """`name==version` requirements of the file and of what it includes with -r (not -c)."""
    pins: dict[str, tuple[str, Path]] = {}
    for kind, included in _includes(path):
        if kind == "-r":
            pins.update(_pins(included))
    for line in _lines(path):
        match = _PIN.match(line)
        if match:
            pins[normalize(match[1])] = (match[2], path)
    return pins


def _rel(path: Path) -> str:
    return path.resolve().relative_to(ROOT).as_posix()


@dataclass(frozen=True)
class RequirementSet:
    requirements: Path
    constraints: RequirementSet | None  # the dev set, for a set the dev set includes

    @property
    def lock(self) -> Path:
        return self.requirements.with_suffix(".lock")

    @property
    def layer(self) -> bool:
        return _rel(self.requirements) == LAYER

    def compile_options(self) -> list[str]:
        platform = LAYER_PLATFORM if self.layer else ROOT_PLATFORM
        options = ["--python-version", PYTHON_VERSION, "--python-platform", platform]
        # The layer ships boto3 and botocore too (layers/dependencies/requirements.txt), at the dev lock's
        # versions: the SDK the tests run is the SDK Lambda loads, not the runtime's own copy.
        return [*options, "--only-binary", ":all:"] if self.layer else options

    def resolution(self) -> str:
        described = f"python {PYTHON_VERSION}, platform {LAYER_PLATFORM if self.layer else ROOT_PLATFORM}"
        if self.layer:
            described += ", wheels only"
        if self.constraints is not None:
            described += f", constraints {_rel(self.constraints.lock)}"
        return described

    def inputs(self) -> list[Path]:
        files = _closure(self.requirements)
        if self.constraints is not None:
            files += [f for f in _closure(self.constraints.requirements) if f not in files]
        return files

    def header(self) -> list[str]:
        return [
            INPUTS_TITLE,
            f"#    resolution: {self.resolution()}",
            *(f"#    {_rel(f)} sha256:{hashlib.sha256(f.read_bytes()).hexdigest()}" for f in self.inputs()),
        ]


def requirement_sets() -> list[RequirementSet]:
    """Every set, the dev set first (the others may be constrained by its lock)."""
    files = sorted(ROOT.glob("requirements*.txt"), key=lambda p: (p.name != DEV, p.name))
    if (ROOT / LAYER).is_file():
        files.append(ROOT / LAYER)
    dev_path = (ROOT / DEV).resolve()
    dev = RequirementSet(dev_path, None) if dev_path.is_file() else None
    within_dev = set(_closure(dev_path)) if dev is not None else set()
    sets = []
    for path in files:
        path = path.resolve()
        if path == dev_path and dev is not None:
            sets.append(dev)
        else:
            sets.append(RequirementSet(path, dev if path in within_dev else None))
    return sets


def locked(lock: Path) -> tuple[dict[str, str], list[str], list[str]]:
    """A lock's packages (name -> version), those of them without a hash, and its header lines."""
    packages: dict[str, str] = {}
    unhashed: list[str] = []
    header: list[str] = []
    current: str | None = None
    hashed = True
    for line in lock.read_text().splitlines():
        match = _LOCKED.match(line)
        if match:
            if current is not None and not hashed:
                unhashed.append(current)
            current, hashed = normalize(match[1]), "--hash=" in line
            packages[current] = match[2]
        elif current is None and line.startswith("#"):
            header.append(line)
        elif "--hash=" in line:
            hashed = True
    if current is not None and not hashed:
        unhashed.append(current)
    return packages, unhashed, header


def problems_of(rset: RequirementSet) -> list[str]:
    txt, lock = _rel(rset.requirements), _rel(rset.lock)
    if not rset.lock.is_file():
        return [f"{lock} is missing: {txt} has no lock"]
    problems = []
    packages, unhashed, header = locked(rset.lock)
    resolution = next((m[1] for m in map(_RESOLUTION.match, header) if m), None)
    if resolution != rset.resolution():
        problems.append(f"{lock} was resolved for '{resolution}', not '{rset.resolution()}'")
    recorded = {m[1]: m[2] for m in map(_RECORDED.match, header) if m}
    for expected in rset.header()[2:]:
        name, digest = expected.removeprefix("#    ").split(" sha256:")
        if name not in recorded:
            problems.append(f"{lock} was not made from {name}")
        elif recorded.pop(name) != digest:
            problems.append(f"{name} changed since {lock} was made from it")
    problems += [f"{lock} was made from {name}, which {txt} no longer includes" for name in recorded]
    for name, (version, source) in sorted(_pins(rset.requirements).items()):
        if name not in packages:
            problems.append(f"{_rel(source)} pins {name}=={version}, but {lock} has no {name}")
        elif packages[name] != version:
            problems.append(f"{_rel(source)} pins {name}=={version}, but {lock} has {name}=={packages[name]}")
    problems += [f"{lock}: {name}=={packages[name]} has no --hash" for name in unhashed]
    if rset.constraints is not None and rset.constraints.lock.is_file():
        dev_lock = _rel(rset.constraints.lock)
        dev_packages = locked(rset.constraints.lock)[0]
        problems += [
            f"{lock} has {name}=={version}, but {dev_lock} has {name}=={dev_packages[name]}"
            for name, version in sorted(packages.items())
            if name in dev_packages and dev_packages[name] != version
        ]
    return problems


def check(only: list[str]) -> int:
    wanted = {(Path.cwd() / p).resolve() for p in only}
    sets = [s for s in requirement_sets() if not wanted or s.lock in wanted or s.requirements in wanted]
    unknown = wanted - {s.lock for s in sets} - {s.requirements for s in sets}
    problems = [f"{path} is not a requirements set or lock of this repository" for path in sorted(unknown)]
    for rset in sets:
        problems += problems_of(rset)
    for problem in problems:
        print(f"locks: {problem}", file=sys.stderr)
    if problems:
        print(
            "locks: a requirements file and its lock disagree: run `make lock` (it re-resolves every set "
            "and rewrites the locks; commit them with the requirements)",
            file=sys.stderr,
        )
        return 1
    print(f"locks: {len(sets)} lock(s) match their requirements: {', '.join(_rel(s.lock) for s in sets)}")
    return 0


def lock(uv: str, upgrade: bool) -> int:
    for rset in requirement_sets():
        command = [
            uv, "pip", "compile", "--quiet", "--generate-hashes", *rset.compile_options(),
            "--custom-compile-command", COMPILE_COMMAND,
            *(["--constraint", _rel(rset.constraints.lock)] if rset.constraints else []),
            *(["--upgrade"] if upgrade else []),
            _rel(rset.requirements), "--output-file", _rel(rset.lock),
        ]  # fmt: skip
        print(f"locks: {_rel(rset.requirements)} -> {_rel(rset.lock)} ({rset.resolution()})")
        result = subprocess.run(command, cwd=ROOT, check=False)  # noqa: S603
        if result.returncode != 0:
            failed = f"resolving {_rel(rset.requirements)} failed (uv exit {result.returncode})"
            print(f"locks: {failed}", file=sys.stderr)
            return result.returncode
        lines = rset.lock.read_text().splitlines()
        at = 2 if lines and lines[0].startswith("# This file was autogenerated by uv") else 0
        rset.lock.write_text("\n".join([*lines[:at], *rset.header(), *lines[at:]]) + "\n")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="scripts/locks.py", description=__doc__.split("\n", 1)[0])
    commands = parser.add_subparsers(dest="command", required=True)
    locking = commands.add_parser("lock", help="re-resolve every requirements set to its lock")
    locking.add_argument("--uv", default=str(Path(sys.executable).parent / "uv"), help="the uv binary")
    locking.add_argument("--upgrade", action="store_true", help="take the newest versions the sets allow")
    checking = commands.add_parser("check", help="fail when a requirements set and its lock disagree")
    checking.add_argument("locks", nargs="*", help="only these locks (or requirements files); default all")
    args = parser.parse_args(argv)
    if args.command == "lock":
        return lock(args.uv, args.upgrade)
    return check(args.locks)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
