"""The pre-commit hooks run what `make lint` and `make typecheck` run: the same .venv tools, the same
arguments. A path added to the Makefile but not to a hook (or the reverse) fails here, not in CI."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]


def make_commands(target: str) -> list[str]:
    """The recipe lines of a Makefile target, with its variables expanded."""
    makefile = (ROOT / "Makefile").read_text()
    variables = dict(re.findall(r"^([A-Z_]+) := (.*)$", makefile, re.MULTILINE))
    recipe = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe, f"no recipe for `make {target}` in the Makefile"

    def expand(text: str) -> str:
        while (expanded := re.sub(r"\$\((\w+)\)", lambda m: variables[m.group(1)], text)) != text:
            text = expanded
        return text

    return [expand(line.strip()) for line in recipe.group(1).splitlines()]


def hooks() -> dict[str, dict[str, Any]]:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    return {hook["id"]: hook for repo in config["repos"] for hook in repo["hooks"]}


def test_the_ruff_hooks_run_what_make_lint_runs() -> None:
    entries = [hooks()[name]["entry"] for name in ("ruff-check", "ruff-format")]

    assert entries == make_commands("lint")


def test_the_mypy_hook_runs_what_make_typecheck_runs_once_on_the_whole_tree() -> None:
    mypy = hooks()["mypy"]

    assert [mypy["entry"]] == make_commands("typecheck")
    # mypy given the staged files alone would check them without the packages they import.
    assert mypy["pass_filenames"] is False


def test_every_hook_runs_a_tool_from_the_projects_venv() -> None:
    for name, hook in hooks().items():
        assert hook["entry"].startswith(".venv/bin/"), name
        assert hook["language"] == "unsupported", name  # no environment of pre-commit's own
