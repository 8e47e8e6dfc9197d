"""Fixtures of the loyalty handler tests: moto with the loyalty resources and a fresh runtime."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws

from tests.handlers.loyalty.world import LoyaltyWorld, create_world


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoyaltyWorld]:
    """moto with the loyalty stack's resources, its functions' environment from the template (the
    stage's points per unit, 10, included), and a fresh runtime."""
    from relay.wiring import reset_all

    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    # Keep the back-off of a transient failure short (it is best effort on moto anyway).
    overrides = {"RELAY_BACKOFF_BASE_SECONDS": "0"}
    with mock_aws():
        created = create_world(overrides)
        for name, value in created.env().items():
            monkeypatch.setenv(name, value)
        reset_all()
        yield created
    reset_all()
