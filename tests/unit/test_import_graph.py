"""No cycles, no side-effect imports: the import arrows among the tool trees (``bench/``, ``ops/``) and
among the kernel's modules (``relay``) all point one way, and no tool imports a first-party module only
for what importing it does (``import infra.stacks  # noqa`` once put ``functions/`` on ``sys.path``).

The imports are read from the source (``ast``): module-level, function-level and ``if TYPE_CHECKING:``
imports alike, since a cycle a function hides or mypy alone follows still ties the two modules together.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Each tree, by the package name its modules are imported under.
TREES = {
    "bench": ROOT / "bench",
    "ops": ROOT / "ops",
    "relay": ROOT / "layers" / "relay" / "python" / "relay",
}
# The repository's own top-level packages: an import of one of these is never for a third party's sake.
FIRST_PARTY = {"infra", "local", "emulator", "relay", "ops", "bench"} | {
    p.name for p in (ROOT / "functions").iterdir() if (p / "__init__.py").exists()
}


def _module_name(package: str, tree: Path, path: Path) -> str:
    parts = [package, *path.relative_to(tree).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def modules() -> dict[str, Path]:
    """Every module of the trees, by its dotted name."""
    found: dict[str, Path] = {}
    for package, tree in TREES.items():
        for path in sorted(tree.rglob("*.py")):
            if "__pycache__" not in path.parts:
                found[_module_name(package, tree, path)] = path
    return found


def _known(name: str) -> str | None:
    """The longest prefix of ``name`` that is one of the trees' modules."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules():
            return candidate
    return None


def _imported(module: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The trees' modules one import statement of ``module`` loads."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if (target := _known(alias.name)) is not None:
                yield target
        return
    base = node.module or ""
    if node.level:  # relative: from the package ``module`` is in (or is, for an __init__)
        package = module.split(".")
        if modules()[module].name != "__init__.py":
            package = package[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, *([base] if base else [])])
    for alias in node.names:
        # ``from ops import dlq`` loads the submodule; ``from ops.app import App`` the module.
        target = _known(f"{base}.{alias.name}") if f"{base}.{alias.name}" in modules() else _known(base)
        if target is not None:
            yield target


@functools.cache
def graph() -> dict[str, set[str]]:
    """module -> the trees' modules it imports, anywhere in its source."""
    edges: dict[str, set[str]] = {}
    for module, path in modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        edges[module] = {
            target
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for target in _imported(module, node)
            if target != module
        }
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``a -> b -> ... -> a``) per strongly connected component of more than one module
    (Tarjan's algorithm; iterative, so a deep graph cannot hit the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)
    return [_a_cycle(edges, component) for component in components]


def _a_cycle(edges: dict[str, set[str]], component: set[str]) -> list[str]:
    """The shortest cycle through the component's first module (breadth first, inside the component)."""
    start = min(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(edges[node] & component):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if child not in came_from:
                    came_from[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"{sorted(component)} is no cycle")  # pragma: no cover: Tarjan found one


def side_effect_imports(path: Path) -> list[str]:
    """``import a.b`` statements of first-party modules whose bound name (``a``) the module never uses:
    imported for what importing does, not for anything they hold."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import):
            continue
        for alias in node.names:
            top = alias.name.split(".")[0]
            bound = alias.asname or top
            if top in FIRST_PARTY and bound not in used:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: import {alias.name}")
    return found


def test_the_graph_reads_the_trees_imports_at_every_level() -> None:
    # A module-level import, a function-level one and one under TYPE_CHECKING: all arrows.
    edges = graph()
    assert "ops.app" in edges["ops.deadlines"]  # module level
    assert "relay.ledger" in edges["ops.ledger"]  # in a function
    assert "ops.app" in edges["ops.checks"]  # under TYPE_CHECKING
    assert "relay.ddb" in edges["relay.outbox"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_among_the_tools_and_the_kernel() -> None:
    found = cycles(graph())
    assert not found, "import cycles (make each one-way: move what both need below both):\n" + "\n".join(
        " -> ".join(cycle) for cycle in found
    )


def test_no_tool_imports_a_first_party_module_for_its_side_effect() -> None:
    found = [
        line
        for path in (*TREES["ops"].rglob("*.py"), *TREES["bench"].rglob("*.py"))
        for line in side_effect_imports(path)
    ]
    assert not found, (
        "side-effect imports (the path or registration they rely on belongs to one explicit entry point, "
        "e.g. ops.paths.use_function_code()):\n" + "\n".join(found)
    )
