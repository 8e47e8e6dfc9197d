"""moto-backed AWS for handler tests."""

from collections.abc import Iterator

import pytest

from tests.handlers.moto_env import Aws, moto_world


@pytest.fixture
def aws() -> Iterator[Aws]:
    with moto_world() as world:
        yield world
