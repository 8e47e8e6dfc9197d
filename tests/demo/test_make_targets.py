"""The README's make targets, run from CI: a target that no longer runs fails the suite.

Each target in the README's table is run by CI in one of three ways, and the table's "in CI" column says
which (``RUNS``; a target in the README with no entry here fails):

- ``make test``: CI's own command runs it (its prerequisites and recipe, read from the Makefile);
- a short form: a test runs the target through make, smaller or on a temporary copy (``SHORT_FORMS``
  names the test: the sandbox targets in test_make_sandbox_targets.py, the tools in
  test_make_tool_targets.py, the demo in test_demo_output.py, the rest here);
- a dry run: ``make -n`` only, for the targets that need an AWS account or rerun the whole suite
  (``DRY_RUNS``).

Every target also resolves (``make -n``: its prerequisites and recipe exist).
"""

from __future__ import annotations

import importlib
import re

import pytest

from local.demo_readme import README
from tests.demo.make_runs import MAKEFILE, make, tail

pytestmark = pytest.mark.e2e

# target -> the test that runs its short form ("module::test", modules in tests/demo).
CHAOS = "test_make_chaos_injects_every_fault_kind_it_claims_and_keeps_every_invariant"
SHORT_FORMS = {
    "demo": "test_demo_output::test_the_demo_passes_injects_its_faults_and_prints_what_the_readme_shows",
    "local": "test_make_sandbox_targets::test_make_local_serves_make_smoke_until_ctrl_c",
    "smoke": "test_make_sandbox_targets::test_make_local_serves_make_smoke_until_ctrl_c",
    "chaos": f"test_make_sandbox_targets::{CHAOS}",
    "cost": "test_make_sandbox_targets::test_make_cost_writes_its_figures_and_make_capacity_reads_them",
    "capacity": "test_make_sandbox_targets::test_make_cost_writes_its_figures_and_make_capacity_reads_them",
    "cost-scale": "test_make_sandbox_targets::test_make_cost_scale_compares_two_sizes",
    "openapi": "test_make_tool_targets::test_make_openapi_writes_the_checked_in_documents",
    "fmt": "test_make_tool_targets::test_make_fmt_fixes_lint_then_formats",
    "hooks": "test_make_tool_targets::test_make_hooks_installs_the_pre_commit_hook",
    "lock": "test_make_tool_targets::test_make_lock_leaves_a_clean_lock_as_it_is",
    "stateful-manifest": "test_make_tool_targets::test_make_stateful_manifest_records_the_synth",
    "clean": "test_make_tool_targets::test_make_clean_removes_build_output_and_keeps_the_environments",
    "bench": "test_make_targets::test_make_bench_runs_at_its_small_size",
    "install": "test_make_targets::test_make_install_is_a_no_op_on_a_fresh_tree",
    "unit": "test_make_targets::test_each_pytest_target_collects_its_tests",
    "handlers": "test_make_targets::test_each_pytest_target_collects_its_tests",
    "infra": "test_make_targets::test_each_pytest_target_collects_its_tests",
    "e2e": "test_make_targets::test_each_pytest_target_collects_its_tests",
}
# Only `make -n`: deploy, diff and destroy need an AWS account and credentials; test-profile reruns the
# whole suite, stage by stage (minutes), which make test has just run.
DRY_RUNS = {"deploy", "diff", "destroy", "test-profile"}
# The public targets whose work make test does by its internal targets: synth, then _cfn-lint / _checkov.
BY_PARTS = {"cfn-lint": ("synth", "_cfn-lint"), "checkov": ("synth", "_checkov")}


def readme_rows() -> list[tuple[list[str], str]]:
    """The README's make-targets table: (the targets of a row, its "in CI" cell)."""
    text = README.read_text(encoding="utf-8").split("## Make targets", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|") for line in text.splitlines() if line.startswith("| `make")]
    return [(re.findall(r"`make ([a-z0-9-]+)", cells[1]), cells[4].strip()) for cells in rows]


def readme_targets() -> list[str]:
    return sorted({t for targets, _ in readme_rows() for t in targets})


def make_test_runs() -> set[str]:
    """The targets `make test` runs: its prerequisites and the targets its recipe makes (``$(MAKE) ...``),
    and theirs, read from the Makefile."""
    makefile = MAKEFILE.read_text(encoding="utf-8")
    rules: dict[str, list[str]] = {}
    for rule in re.finditer(r"^([a-z_][a-z0-9_-]*):(?!=)([^\n]*)\n((?:\t[^\n]*\n)*)", makefile, re.MULTILINE):
        made = [w for line in rule[3].splitlines() if "$(MAKE)" in line for w in line.split() if "$" not in w]
        rules[rule[1]] = rule[2].split("##")[0].split() + [w for w in made if not w.startswith("-")]
    todo, found = list(rules["test"]), set()
    while todo:
        name = todo.pop()
        if name in rules and name not in found:
            found.add(name)
            todo += rules[name]
    return found


def test_the_readme_lists_the_targets() -> None:
    assert {"demo", "test", "bench", "chaos", "cost"} <= set(readme_targets())


def test_make_test_runs_the_checks_it_claims() -> None:
    claimed = {"check-locks", "lint", "synth", "typecheck", "_cfn-lint", "_checkov", "pytest"}
    assert claimed <= make_test_runs()


@pytest.mark.parametrize("target", readme_targets())
def test_each_readme_target_runs_in_ci(target: str) -> None:
    """Each target is run by make test, by a short-form test that exists, or is one of the dry runs."""
    runs = make_test_runs()
    by_parts = target in BY_PARTS and set(BY_PARTS[target]) <= runs
    by_make_test = target == "test" or target in runs or by_parts
    if target in SHORT_FORMS:
        module, name = SHORT_FORMS[target].split("::")
        assert hasattr(importlib.import_module(f"tests.demo.{module}"), name), SHORT_FORMS[target]
    else:
        assert by_make_test or target in DRY_RUNS, (
            f"make {target} is in the README's table, but CI does not run it: give it a short form here"
        )


def test_the_readme_says_which_targets_ci_only_dry_runs() -> None:
    wrong = [
        (targets, cell)
        for targets, cell in readme_rows()
        if ("dry run" in cell) != any(t in DRY_RUNS for t in targets) or not cell
    ]
    assert not wrong, f"the README's 'in CI' cell of these rows does not match DRY_RUNS: {wrong}"


@pytest.mark.parametrize("target", readme_targets())
def test_each_readme_target_resolves(target: str) -> None:
    run = make("-n", target, "RATE=1", "REASON=dry run", timeout=120)
    assert run.returncode == 0, tail(run, 2000)


def test_make_bench_runs_at_its_small_size() -> None:
    run = make("bench", env={"BENCH_SIZE": "small"})
    assert run.returncode == 0, tail(run, 3000)
    for figure in (
        "synth_seconds",
        "handler_import_ratio",
        "patched_client_us_per_transaction",
        "aws_iam_over_none_ratio",
        "otel_import_ratio",
        "sandbox_ops_per_second",
    ):
        assert re.search(rf"^{figure}: \S", run.stdout, re.MULTILINE), f"make bench printed no {figure}"


def test_make_install_is_a_no_op_on_a_fresh_tree() -> None:
    run = make("install", timeout=300)
    assert run.returncode == 0, tail(run)


@pytest.mark.parametrize("target", ["unit", "handlers", "infra", "e2e"])
def test_each_pytest_target_collects_its_tests(target: str) -> None:
    """The short form of a pytest folder's target: the same command, collecting only (the tests themselves
    run in make test's own pytest, which is make pytest)."""
    run = make(target, "WORKERS=0", "PYTEST_ARGS=--collect-only -p no:randomly", timeout=300)
    assert run.returncode == 0, tail(run)
    collected = re.search(r"^(\d+) tests? collected", run.stdout, re.MULTILINE)
    assert collected is not None and int(collected[1]) > 0, tail(run)
