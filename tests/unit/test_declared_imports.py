"""Say what you use: every third-party module that the project's code imports is declared by a
dependency group of pyproject.toml, not borrowed from another package's dependencies; and what the
functions and the kernel import at run time ships in the Lambda layer (the ``layer`` group).

The imports are read from the source (``ast``), so a module imported only in one branch or one test
counts. A module imported under ``if TYPE_CHECKING:`` is for mypy only: declared by the dev tools, never
needed in the layer.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata as metadata
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = (
    "functions",
    "layers",
    "emulator",
    "local",
    "ops",
    "bench",
    "tests",
    "infra",
    "scripts",
    "examples",
    "app.py",
)
RUNTIME = ("functions", "layers")  # what runs in Lambda, from the dependency layer
LAYER_GROUP = "layer"
# The packages of this repository: the services (functions/<name>), the kernel, the tool trees.
FIRST_PARTY = {p.name for p in (ROOT / "functions").iterdir() if (p / "__init__.py").exists()} | {
    "relay",
    "emulator",
    "local",
    "flow",  # examples/your-first-flow's service package
    "ops",
    "bench",
    "tests",
    "infra",
    "scripts",
    "app",
    "__future__",
}
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _groups() -> dict[str, list[str]]:
    """pyproject.toml's dependency groups: each group's own requirement strings (includes left out)."""
    groups = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["dependency-groups"]
    return {name: [r for r in entries if isinstance(r, str)] for name, entries in groups.items()}


def _requirements(*groups: str) -> dict[str, set[str]]:
    """The distributions the named groups (all when none) declare, each with the extras it asks for."""
    declared: dict[str, set[str]] = {}
    for group, entries in _groups().items():
        if groups and group not in groups:
            continue
        for entry in entries:
            found = _NAME.match(entry)
            if found:
                extras = {e.strip() for e in (found.group(2) or "[]")[1:-1].split(",") if e.strip()}
                declared.setdefault(_normal(found.group(1)), set()).update(extras)
    return declared


def _with_extras(declared: dict[str, set[str]]) -> set[str]:
    """The declared distributions, and those an extra they ask for brings (``boto3-stubs[sqs]`` declares
    ``mypy-boto3-sqs``): an extra is a declaration made on purpose."""
    names = set(declared)
    for name, extras in declared.items():
        for requirement in metadata.requires(name) or () if extras else ():
            marker = requirement.partition(";")[2]
            if any(re.search(rf"extra\s*==\s*['\"]{re.escape(e)}['\"]", marker) for e in extras):
                found = _NAME.match(requirement)
                if found:
                    names.add(_normal(found.group(1)))
    return names


def _imports(path: Path) -> Iterator[tuple[str, bool]]:
    """(top-level module, imported only for type checking) for every absolute import in `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        else:
            continue
        for module in modules:
            yield module.split(".")[0], id(node) in typing_only


def _third_party(path: Path, module: str) -> bool:
    if module in sys.stdlib_module_names or module in FIRST_PARTY:
        return False
    # A sibling module put on sys.path by its own tree (bench/in_process_moto.py, tests/infra/stacks.py).
    return not any(
        (d / f"{module}.py").exists() or (d / module).is_dir() for d in (path.parent, *path.parents)
    )


def _sources() -> Iterator[Path]:
    for entry in SCANNED:
        path = ROOT / entry
        found = [path] if path.suffix == ".py" else sorted(path.rglob("*.py"))
        # An app's synthesized assembly (examples/*/cdk.out) holds its bundled layer: not our imports.
        yield from (p for p in found if "cdk.out" not in p.relative_to(ROOT).parts)


def _distributions(module: str) -> set[str]:
    return {_normal(d) for d in metadata.packages_distributions().get(module, [])}


@functools.cache
def used() -> dict[str, dict[str, bool]]:
    """module -> {source file: imported at run time}."""
    found: dict[str, dict[str, bool]] = {}
    for path in _sources():
        for module, typing_only in _imports(path):
            if _third_party(path, module):
                at_run_time = found.setdefault(module, {}).get(str(path.relative_to(ROOT)), False)
                found[module][str(path.relative_to(ROOT))] = at_run_time or not typing_only
    return found


def test_every_third_party_import_is_declared_by_a_dependency_group() -> None:
    declared = _with_extras(_requirements())
    undeclared = {
        module: sorted(files)[:3] for module, files in used().items() if not _distributions(module) & declared
    }
    assert undeclared == {}, (
        "imported but declared by no dependency group of pyproject.toml (it only arrives through another "
        f"package): {undeclared}; add it, pinned, to the group of what imports it and run `make lock`"
    )


def test_what_the_functions_and_the_kernel_import_at_run_time_ships_in_the_layer() -> None:
    shipped = _with_extras(_requirements(LAYER_GROUP))
    missing = {
        module: sorted(f for f, at_run_time in files.items() if at_run_time)[:3]
        for module, files in used().items()
        if any(at_run_time and f.startswith(RUNTIME) for f, at_run_time in files.items())
        and not _distributions(module) & shipped
        and not all(f.startswith(("layers/dependencies",)) for f in files)
    }
    missing = {m: [f for f in files if f.startswith(RUNTIME)] for m, files in missing.items()}
    assert missing == {}, (
        f"imported at run time by Lambda code but not in pyproject.toml's {LAYER_GROUP} group: {missing}"
    )


def test_the_scan_sees_imports_and_tells_type_checking_ones_apart(tmp_path: Path) -> None:
    # The checks above pass on an empty scan too: this one shows the scan finds what it must.
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\nimport boto3\n"
        "if TYPE_CHECKING:\n    from mypy_boto3_sqs import SQSClient\n"
    )
    assert sorted(_imports(source)) == [("boto3", False), ("mypy_boto3_sqs", True), ("typing", False)]
    everything = used()
    assert "boto3" in everything and "pytest" in everything
    assert everything["mypy_boto3_sqs"] and not any(
        at_run_time for f, at_run_time in everything["mypy_boto3_sqs"].items() if f.startswith(RUNTIME)
    )
