"""The console's tests: one sandbox for the folder (a scope of its own, tests/scheduling.py), a console on
it that may redrive and one that may not, and headless Chromium from the system's packages driven by
Playwright (no browser download: `make test` installs Debian's chromium when it is missing).

Screenshots go to docs/console/ when RELAY_SCREENSHOTS=1 (how the checked-in ones are made), else to a
temporary folder, so a test run leaves the tree as it was."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from local.sandbox import Sandbox
from ops.app import App
from ops.console.jobs import Redrives, Replays
from ops.console.server import Console
from tests.e2e.conftest import sandbox_config

# The Makefile's CHROMIUM (exported), which its _browser target installs when missing.
CHROMIUM = os.environ.get("CHROMIUM") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DOCS = Path(__file__).resolve().parents[2] / "docs" / "console"


# Package-scoped, as tests/e2e's: stopped when the console's tests are done on this worker.
@pytest.fixture(scope="package")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    config = sandbox_config(tmp_path_factory, "console-sandbox-logs", trace_everything=True)
    with Sandbox(config, log=lambda *_: None) as running:
        yield running


@pytest.fixture(scope="session")
def audit_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("console-audit") / "redrive-audit.jsonl"


def _console(sb: Sandbox, *, allowed: bool, audit_file: Path) -> Console:
    from ops.paths import use_function_code

    use_function_code()
    app = App(stage="dev", endpoint_url=sb.endpoint, templates=sb.config.cdk_out)
    redrives = Redrives(app, allowed=allowed, audit_file=audit_file, verify_timeout=120, poll_seconds=0.5)
    replays = Replays(app, allowed=allowed, audit_file=audit_file.with_name("replay-audit.jsonl"))
    return Console(app, port=0, redrives=redrives, replays=replays, history_interval=1.0).start()


@pytest.fixture(scope="package")
def console(sandbox: Sandbox, audit_file: Path) -> Iterator[Console]:
    """A console started with --allow-redrive."""
    running = _console(sandbox, allowed=True, audit_file=audit_file)
    yield running
    running.close()


@pytest.fixture(scope="package")
def read_only_console(sandbox: Sandbox, audit_file: Path) -> Iterator[Console]:
    """A console as it starts by default: read-only."""
    running = _console(sandbox, allowed=False, audit_file=audit_file)
    yield running
    running.close()


@pytest.fixture(scope="session", autouse=True)
def _expect_deadline() -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)


@pytest.fixture(scope="package")
def browser_context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not shutil.which(CHROMIUM):
        pytest.fail(f"no Chromium at {CHROMIUM}: `make pytest` installs Debian's (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),  # a fresh user-data-dir
            executable_path=CHROMIUM,
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def page(browser_context: Any) -> Iterator[Any]:
    """A tab; any request it makes off 127.0.0.1 (a CDN) fails the test."""
    tab = browser_context.new_page()
    # Deadlines for what the page waits on (the sandbox shares 2 cores with the rest of make test's
    # workers): how long a poll may go on, never how long something should take.
    tab.set_default_timeout(30_000)
    outside: list[str] = []
    tab.on(
        "request",
        lambda r: outside.append(r.url) if not r.url.startswith(("http://127.0.0.1", "data:")) else None,
    )
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    yield tab
    tab.close()
    assert not outside, f"the page fetched from outside the sandbox: {outside}"
    assert not errors, f"the page's script failed: {errors}"


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.environ.get("RELAY_SCREENSHOTS") == "1":
        DOCS.mkdir(parents=True, exist_ok=True)
        return DOCS
    return tmp_path_factory.mktemp("console-screenshots")
