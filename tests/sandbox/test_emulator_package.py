"""The emulator is its own package: it imports nothing of the app that uses it, and its pins are the
ones `make` installs."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "emulator"
# Relay's own trees: the app (functions, infra, the kernel), its sandbox (local: demo, chaos, fakes),
# its tools (ops, bench, scripts) and its tests.
APP = {
    "functions",
    "infra",
    "relay",
    "local",
    "ops",
    "bench",
    "scripts",
    "tests",
    "app",
    "payments",
    "orders",
}
APP |= {p.name for p in (ROOT / "functions").iterdir() if p.is_dir()}


def imported_roots(path: Path) -> set[tuple[str, int]]:
    """Every top-level module a file imports (module level and inside functions alike), with its line."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {(alias.name.split(".")[0], node.lineno) for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add((node.module.split(".")[0], node.lineno))
    return found


def app_imports(package: Path, root: Path = ROOT) -> list[str]:
    return sorted(
        f"{path.relative_to(root)}:{line} imports {name}"
        for path in package.rglob("*.py")
        for name, line in imported_roots(path)
        if name in APP
    )


def test_the_emulator_imports_nothing_of_the_app() -> None:
    assert app_imports(PACKAGE) == []


def test_the_check_finds_an_app_import_inside_a_function(tmp_path: Path) -> None:
    package = tmp_path / "emulator"
    package.mkdir()
    (package / "glue.py").write_text("import json\n\n\ndef f():\n    from local.fakes import WebhookFake\n")
    assert app_imports(package, tmp_path) == ["emulator/glue.py:5 imports local"]


def test_the_emulator_imports_alone_in_a_fresh_interpreter() -> None:
    """Importing the whole package loads no module of the app (sys.path has only the repository root,
    as an installed package would have its site-packages)."""
    modules = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in {"__init__", "worker", "zygote"})
    code = (
        "import sys\n"
        + "".join(f"import emulator.{m}\n" for m in modules)
        + f"app = {sorted(APP)!r}\n"
        + "print(sorted(n for n in sys.modules if n.split('.')[0] in app))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def _pins(requirements: list[str]) -> dict[str, str]:
    pins = {}
    for requirement in requirements:
        if isinstance(requirement, str) and (
            match := re.fullmatch(r"([A-Za-z0-9_.-]+)(\[[^]]*\])?==(.+)", requirement)
        ):
            pins[match.group(1).lower()] = match.group(3)
    return pins


def test_the_emulators_pins_are_the_ones_make_installs() -> None:
    own = _pins(tomllib.loads((PACKAGE / "pyproject.toml").read_text())["project"]["dependencies"])
    groups = tomllib.loads((ROOT / "pyproject.toml").read_text())["dependency-groups"]
    installed = _pins(groups["sandbox"]) | _pins(groups["layer"])
    assert own and {name: installed.get(name) for name in own} == own


def emulator_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (at module level or inside a function)."""
    graph: dict[str, set[str]] = {}
    for path in package.glob("*.py"):
        edges = graph.setdefault(path.stem, set())
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module == package.name:
                edges |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(package.name + "."):
                edges.add(str(node.module).split(".")[1])
            elif isinstance(node, ast.Import):
                edges |= {a.name.split(".")[1] for a in node.names if a.name.startswith(package.name + ".")}
        edges.discard(path.stem)
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle, as the modules around it, or [] when the graph only points one way."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str]:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return []
        for nxt in sorted(graph.get(node, ())):
            if found := visit(nxt, [*path, node]):
                return found
        done.add(node)
        return []

    for start in sorted(graph):
        if found := visit(start, []):
            return found
    return []


def test_the_emulators_modules_import_one_way() -> None:
    assert cycle(emulator_graph(PACKAGE)) == []


def test_the_cycle_check_finds_a_function_level_cycle(tmp_path: Path) -> None:
    package = tmp_path / "emulator"
    package.mkdir()
    (package / "meter.py").write_text("from emulator import enforcer\n")
    (package / "enforcer.py").write_text("def f():\n    from emulator.meter import add\n")
    assert cycle(emulator_graph(package)) == ["enforcer", "meter", "enforcer"]
