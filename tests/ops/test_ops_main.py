"""python -m ops: every command has a clear --help; other modules add commands without editing it."""

from __future__ import annotations

import argparse
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import ops.__main__ as dispatcher
from ops.__main__ import build_parser, main

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["status"], "never receives a message"),
        (["dlq", "sample"], "Receiving raises each message's receive count"),
        (["dlq", "redrive"], "Exit 0 done, 1 stopped, 2 usage"),
        (["doctor"], "Exit 1 on any FAIL"),
    ],
)
def test_every_command_explains_itself_and_takes_the_connection_options(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main([*argv, "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert says in text
    for option in ("--stage STAGE", "--region REGION", "--endpoint-url ENDPOINT_URL", "--local"):
        assert option in text


def test_python_dash_m_ops_runs_from_the_repository_root() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ops", "--help"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    for command in ("status", "dlq", "doctor"):
        assert command in result.stdout


def _module(name: str, register: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.register = register  # type: ignore[attr-defined]
    return module


def test_a_module_with_register_adds_its_commands_with_either_signature(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def register_plain(subparsers: Any) -> None:
        parser = subparsers.add_parser("hello", help="say hello")
        parser.set_defaults(func=lambda args: print("hello") or 0)

    def register_with_connection(subparsers: Any, add_connection_arguments: Any, connect: Any) -> None:
        parser = subparsers.add_parser("operation", help="an operation")
        add_connection_arguments(parser)
        parser.set_defaults(run=lambda args: print(f"stage {args.stage}") or 0)

    def broken(subparsers: Any) -> None:
        raise RuntimeError("boom")

    for name, register in (
        ("ops.hello", register_plain),
        ("ops.lookalike", register_with_connection),
        ("ops.broken", broken),
    ):
        monkeypatch.setitem(sys.modules, name, _module(name, register))
    monkeypatch.setattr(
        dispatcher,
        "command_modules",
        lambda: [*dispatcher.BUILT_IN, "ops.hello", "ops.lookalike", "ops.broken"],
    )

    assert main(["hello"]) == 0
    assert main(["operation", "--stage", "prod"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == ["hello", "stage prod"]
    assert "warning: ops module ops.broken: register failed: RuntimeError: boom" in captured.err


def test_a_planned_command_no_module_registered_says_where_it_comes_from(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(dispatcher, "command_modules", lambda: list(dispatcher.BUILT_IN))
    parser, problems = build_parser()
    assert problems == []
    choices = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert {"status", "dlq", "doctor", "operation", "order", "replay"} <= set(choices)

    assert main(["replay", "op-1", "--reason", "x"]) == 2
    assert "`replay` is not available in this checkout" in capsys.readouterr().err


def test_every_module_of_the_package_is_considered_builtins_first() -> None:
    modules = dispatcher.command_modules()
    assert modules[:3] == ["ops.status", "ops.dlq", "ops.doctor"]
    assert "ops.seed_stock" in modules  # imported, and skipped: it has no register
    assert "ops.app" not in modules and "ops.__main__" not in modules
