"""Patch 3 (``emulator.patches.dynamodb_lock``): DynamoDB's conditional writes atomic in a threaded moto,
and no read in the middle of a write."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core.models import DEFAULT_ACCOUNT_ID

from emulator.patches import dynamodb_lock
from tests.sandbox.patches.support import installed, table_with_stream

RACERS = 4


def _winners_of_racing_conditional_puts(monkeypatch: pytest.MonkeyPatch, patched: bool) -> list[str]:
    """Four threads Put one item under ``attribute_not_exists(pk)``, each pausing between evaluating
    its condition and writing (the window a busy server leaves open, widened); the writers that won."""
    from moto.dynamodb.exceptions import ConditionalCheckFailed
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodb.models import table as table_module

    evaluate = table_module.get_filter_expression

    def slowed(*args: Any, **kwargs: Any) -> Any:
        condition = evaluate(*args, **kwargs)
        check = condition.expr

        def checked_then_paused(item: Any) -> Any:
            passed = check(item)
            time.sleep(0.05)
            return passed

        condition.expr = checked_then_paused
        return condition

    monkeypatch.setattr(table_module, "get_filter_expression", slowed)
    with installed(dynamodb_lock.install) if patched else contextlib.nullcontext(), mock_aws():
        table_with_stream(boto3.client("dynamodb", region_name="us-east-1"))
        backend = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
        winners: list[str] = []

        def put(writer: str) -> None:
            try:
                backend.put_item(
                    "t",
                    {"pk": {"S": "claim"}, "writer": {"S": writer}},
                    condition_expression="attribute_not_exists(pk)",
                )
            except ConditionalCheckFailed:
                return
            winners.append(writer)

        threads = [threading.Thread(target=put, args=(f"w{n}",)) for n in range(RACERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        return winners


def test_of_racing_conditional_writes_exactly_one_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto checks each condition and writes without a lock: every racer passes ``attribute_not_exists``
    and "wins". Under the lock, as on DynamoDB, one wins and the others fail their condition."""
    assert len(_winners_of_racing_conditional_puts(monkeypatch, patched=False)) == RACERS
    assert len(_winners_of_racing_conditional_puts(monkeypatch, patched=True)) == 1


def test_a_read_waits_for_a_write_in_progress() -> None:
    """Reads take the writes' lock: a GetItem cannot land in the middle of a commit."""
    from moto.dynamodb.models import dynamodb_backends

    with installed(dynamodb_lock.install), mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        table_with_stream(ddb)
        backend = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
        read: list[Any] = []
        reader = threading.Thread(target=lambda: read.append(backend.get_item("t", {"pk": {"S": "k"}})))
        with dynamodb_lock.WRITE_LOCK:  # a write holding the lock: it commits before the read returns
            reader.start()
            reader.join(0.2)
            assert reader.is_alive() and not read
            backend.put_item("t", {"pk": {"S": "k"}, "v": {"S": "committed"}})
        reader.join(5)
        assert read[0].to_json()["Attributes"]["v"] == {"S": "committed"}
