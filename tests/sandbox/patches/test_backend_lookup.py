"""Patch 9 (``emulator.patches.backend_lookup``): looking a service backend up by account, with and
without moto's global lock."""

from __future__ import annotations

import uuid
from typing import Any

import boto3
import pytest
from moto import mock_aws

from emulator.patches import backend_lookup
from tests.sandbox.patches.support import installed


class _CountingLock:
    """moto's ``backend_lock``, counting how often it is taken."""

    def __init__(self, lock: Any) -> None:
        self.lock, self.taken = lock, 0

    def __enter__(self) -> Any:
        self.taken += 1
        return self.lock.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self.lock.__exit__(*exc)


def _locks_taken_by_five_lookups_of_a_new_account(monkeypatch: pytest.MonkeyPatch) -> int:
    from moto.core import base_backend
    from moto.dynamodb.models import dynamodb_backends

    account = str(uuid.uuid4().int)[:12]  # not created before: the first lookup creates it
    lock = _CountingLock(base_backend.backend_lock)
    with monkeypatch.context() as counting:
        counting.setattr(base_backend, "backend_lock", lock)
        found = [dynamodb_backends[account] for _ in range(5)]
    assert all(backend is found[0] for backend in found)
    return lock.taken


def test_a_backend_that_exists_is_looked_up_without_motos_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto takes its one global lock on every lookup; with the patch only the first, which creates
    the account's backend."""
    assert _locks_taken_by_five_lookups_of_a_new_account(monkeypatch) == 5
    with installed(backend_lookup.install):
        assert _locks_taken_by_five_lookups_of_a_new_account(monkeypatch) == 1


def test_backend_lookup_without_the_lock_returns_motos_backends_and_still_creates_new_accounts() -> None:
    from moto.core.base_backend import BackendDict
    from moto.dynamodb.models import dynamodb_backends

    with installed(backend_lookup.install), mock_aws():
        account = "210987654321"  # not created before: goes through moto's own path
        first = dynamodb_backends[account]["us-east-1"]
        assert dynamodb_backends[account]["us-east-1"] is first  # the fast path: same backend
        assert dynamodb_backends in BackendDict._instances
        boto3.client("dynamodb", region_name="us-east-1").list_tables()
