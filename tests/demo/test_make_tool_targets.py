"""The README's make targets that are tools (formatting, hooks, locks, generated files, clean), each run
through make for real, on a temporary file, repository or copy of the tree: a broken recipe fails here, and
the developer's tree, hooks and caches are not touched. A generated file that differs from the checked-in
one (the OpenAPI documents, the locks) fails too."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from local.demo_readme import ROOT
from tests.demo.make_runs import make, tail

pytestmark = pytest.mark.e2e

GIT = shutil.which("git") or "git"
VENV = f"VENV={ROOT / '.venv'}"  # a copy of the tree uses the repo's environment (make -C copy VENV=...)
SERVICES = ("loyalty", "orders", "payments", "scores")
# What `make lock` writes (the Makefile's EXPORTS, and uv.lock itself).
LOCK_FILES = (
    "uv.lock",
    "requirements.txt",
    "requirements-sandbox.txt",
    "requirements-dev.txt",
    "requirements-checkov.txt",
    "layers/dependencies/requirements.txt",
)


def copy_files(root: Path, *paths: str) -> None:
    """Copies of the repo's files under ``root``, times kept: make sees the installs newer than them."""
    for path in paths:
        source, target = ROOT / path, root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, target)


def test_make_openapi_writes_the_checked_in_documents(tmp_path: Path) -> None:
    run = make("openapi", f"OPENAPI_DIR={tmp_path}")
    assert run.returncode == 0, tail(run)
    written = {svc: (tmp_path / svc / "openapi.json").read_text() for svc in SERVICES}
    checked_in = {svc: (ROOT / "functions" / svc / "openapi.json").read_text() for svc in SERVICES}
    stale = [svc for svc in SERVICES if written[svc] != checked_in[svc]]
    assert not stale, f"functions/<service>/openapi.json of {stale} is not the API's: run make openapi"


def test_make_fmt_fixes_lint_then_formats(tmp_path: Path) -> None:
    copy_files(tmp_path, "pyproject.toml")  # the repo's ruff settings
    source = tmp_path / "sample.py"
    source.write_text("import sys\nimport os\ndef f( a ):\n  return os.sep+sys.platform+a\n")
    run = make("fmt", f"PYTHON_SOURCES={source}")
    assert run.returncode == 0, tail(run)
    assert source.read_text() == (
        "import os\nimport sys\n\n\ndef f(a):\n    return os.sep + sys.platform + a\n"
    ), source.read_text()


def test_make_hooks_installs_the_pre_commit_hook(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    subprocess.run([GIT, "init", "--quiet", str(repo)], check=True)
    ours = ROOT / ".git" / "hooks" / "pre-commit"
    before = ours.read_bytes() if ours.exists() else None
    git = {"GIT_DIR": str(repo / ".git"), "GIT_WORK_TREE": str(repo)}
    run = make("hooks", env=git)
    assert run.returncode == 0, tail(run)
    hook = repo / ".git" / "hooks" / "pre-commit"
    assert hook.exists() and "pre-commit" in hook.read_text(), tail(run)
    assert (ours.read_bytes() if ours.exists() else None) == before, "make hooks changed this clone's hook"


def test_make_lock_leaves_a_clean_lock_as_it_is(tmp_path: Path) -> None:
    """On a copy of pyproject.toml and the locks: ``make lock`` resolves again (uv's cache, else the index)
    and exports each group; a clean tree's files come out the same."""
    copy_files(tmp_path, "pyproject.toml", *LOCK_FILES)
    run = make("lock", VENV, cwd=tmp_path)
    assert run.returncode == 0, tail(run)
    changed = [path for path in LOCK_FILES if (tmp_path / path).read_text() != (ROOT / path).read_text()]
    assert not changed, f"make lock rewrote {changed}: pyproject.toml and the locks differ; run make lock"


def test_make_stateful_manifest_records_the_synth(tmp_path: Path) -> None:
    """On a copy of the app (the manifest's path is infra/'s own, so the repo's is not rewritten)."""
    copy_files(
        tmp_path,
        "app.py",
        "cdk.json",
        "infra",
        "functions",
        "layers",
        "package.json",
        "package-lock.json",
        "requirements-sandbox.txt",
        "requirements-dev.txt",
    )
    (tmp_path / "node_modules").symlink_to(ROOT / "node_modules")
    checked_in = (ROOT / "infra" / "stateful-resources.json").read_text()
    run = make("stateful-manifest", VENV, "REASON=CI's short form of make stateful-manifest", cwd=tmp_path)
    assert run.returncode == 0, tail(run)
    assert "stateful resources" in run.stdout, tail(run)
    assert (tmp_path / "infra" / "stateful-resources.json").exists()
    assert (ROOT / "infra" / "stateful-resources.json").read_text() == checked_in


def test_make_clean_removes_build_output_and_keeps_the_environments(tmp_path: Path) -> None:
    removed = ("cdk.out", ".pytest_cache", ".mypy_cache", ".ruff_cache")
    kept = (".venv", ".venv-checkov", "node_modules", "app.py")
    for name in removed + kept[:-1]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "file").write_text("x")
    (tmp_path / "app.py").write_text("x")
    run = make("clean", cwd=tmp_path)
    assert run.returncode == 0, tail(run)
    assert [name for name in removed if (tmp_path / name).exists()] == []
    assert [name for name in kept if not (tmp_path / name).exists()] == []
