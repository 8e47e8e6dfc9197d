"""moto-backed AWS for handler tests."""

from collections.abc import Iterator

import pytest

from tests.handlers import stack_world
from tests.handlers.moto_env import Aws, moto_world


@pytest.fixture
def aws() -> Iterator[Aws]:
    with moto_world() as world:
        yield world


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """What building the worlds from the stacks cost this session (only when some test built one)."""
    costs = stack_world.COSTS
    if costs["worlds"]:
        terminalreporter.write_line(
            f"stack worlds: templates {costs['assembly']:.1f} s ({costs['assembly_source']}), "
            f"{costs['worlds']:.0f} worlds provisioned in {costs['provision']:.1f} s"
        )
