"""Fixtures of the scores handler tests: moto with the scores resources and a fresh runtime."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws

from tests.handlers.scores.world import ScoresWorld, create_world


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScoresWorld]:
    from relay.wiring import reset_all

    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    with mock_aws():
        created = create_world()
        for name, value in created.env().items():
            monkeypatch.setenv(name, value)
        reset_all()
        yield created
    reset_all()
