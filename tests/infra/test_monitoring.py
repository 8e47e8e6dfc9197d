"""Monitoring is a construct the stack hands what it built; resource constructs know nothing of alarms, and
nothing in infra/ imports in a circle."""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

import pytest
from stacks import bare, consumer, queue

from infra.config import ConsumerSettings, QueueSettings, ScoresConfig
from infra.constructs import defaults
from infra.constructs.monitoring import ServiceMonitoring

INFRA = Path(__file__).resolve().parents[2] / "infra"


def test_a_queue_not_handed_to_monitoring_fails_synth():
    def body(stack):
        watched = queue(stack, "Watched", name="watched")
        queue(stack, "Forgotten", name="forgotten")
        ServiceMonitoring(stack, "Alarms", settings=stack.monitoring, queues=[watched])

    app = bare(body)
    with pytest.raises(RuntimeError, match=r"svc/Forgotten/Queue \(queue\) is not watched"):
        app.synth()


def test_a_consumer_not_handed_to_monitoring_fails_synth():
    def body(stack):
        work = queue(stack, "Work", name="work")
        consumer(stack, "Worker", queue=work, handler="svc.worker.handler")
        ServiceMonitoring(stack, "Alarms", settings=stack.monitoring, queues=[work])

    with pytest.raises(RuntimeError, match=r"svc/Worker \(function\) is not watched"):
        bare(body).synth()


def _imports(path: Path) -> set[str]:
    """The infra modules `path` imports (TYPE_CHECKING imports included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("infra")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("infra"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                is_module = (INFRA.parent / (candidate.replace(".", "/") + ".py")).exists()
                found.add(candidate if is_module else node.module)
    return found


def _graph() -> dict[str, set[str]]:
    modules = {
        ".".join(p.relative_to(INFRA.parent).with_suffix("").parts).removesuffix(".__init__"): p
        for p in INFRA.rglob("*.py")
    }
    return {name: _imports(path) & set(modules) for name, path in modules.items()}


def test_there_is_no_import_cycle_in_infra():
    graph = _graph()
    cycles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        for target in sorted(graph[module]):
            if target in path:
                cycles.append([*path[path.index(target) :], target])
            elif target not in done:
                visit(target, [*path, target])
        done.add(module)

    done: set[str] = set()
    for module in sorted(graph):
        if module not in done:
            visit(module, [module])
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_constructs_know_neither_the_stacks_nor_the_monitoring():
    graph = _graph()
    for module, targets in graph.items():
        if module.startswith("infra.constructs.") and module != "infra.constructs.monitoring":
            assert not {t for t in targets if t.startswith("infra.stacks")}, module
            assert "infra.constructs.monitoring" not in targets, module
        if module.startswith("infra.constructs."):
            source = (INFRA.parent / (module.replace(".", "/") + ".py")).read_text()
            assert "RelayStack" not in source, module


def test_the_stage_config_defaults_are_the_construct_defaults():
    # cdk.json overrides a default; it never restates it, so there is one value to change.
    for settings, values in ((QueueSettings(), defaults.QUEUES), (ConsumerSettings(), defaults.CONSUMERS)):
        for field in fields(values):
            if field.name in type(settings).model_fields:
                assert getattr(settings, field.name) == getattr(values, field.name), field.name
    scores = ScoresConfig()
    for field in fields(defaults.SCHEDULED_CALLS):
        assert getattr(scores, field.name) == getattr(defaults.SCHEDULED_CALLS, field.name), field.name
