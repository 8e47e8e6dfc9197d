"""The kernel's client Idempotency-Key binding (relay.request_keys) on moto DynamoDB."""

from __future__ import annotations

import pytest

from relay.idempotency import apply_writes
from relay.request_keys import IdempotencyKeyMismatch, RequestKeyRecord, RequestKeys, request_sha256
from tests.handlers.moto_env import Aws


def keys(aws: Aws) -> RequestKeys:
    return RequestKeys(
        table_name=aws.table,
        ddb_client=aws.ddb,
        entity="widget",
        id_attribute="widgetId",
        retry_hint="a new widget",
    )


def accept(aws: Aws, key: str | None, body: dict[str, str], created: list[str]) -> tuple[str, bool]:
    def create(bind):  # type: ignore[no-untyped-def]
        widget_id = f"w-{len(created) + 1}"
        apply_writes(bind(widget_id), ddb_client=aws.ddb) if key is not None else None
        created.append(widget_id)
        return widget_id, False

    def replay(record: RequestKeyRecord) -> tuple[str, bool]:
        return record.entity_id, True

    return keys(aws).accept_once(key, request_sha256(body), ttl_days=1, create=create, replay=replay)


def test_same_key_and_body_answer_the_first_entity_without_creating_another(aws: Aws) -> None:
    created: list[str] = []
    first = accept(aws, "k-1", {"a": "1", "b": "2"}, created)
    again = accept(aws, "k-1", {"b": "2", "a": "1"}, created)  # key order does not matter

    assert first == ("w-1", False) and again == ("w-1", True)
    assert created == ["w-1"]
    stored = aws.item("request-key#k-1")
    assert stored is not None and stored["widgetId"] == {"S": "w-1"} and "expiresAt" in stored


def test_same_key_with_another_body_is_a_mismatch_naming_both_hashes(aws: Aws) -> None:
    created: list[str] = []
    accept(aws, "k-2", {"a": "1"}, created)

    with pytest.raises(IdempotencyKeyMismatch) as raised:
        accept(aws, "k-2", {"a": "2"}, created)

    assert created == ["w-1"]
    assert request_sha256({"a": "1"})[:12] in str(raised.value)
    assert request_sha256({"a": "2"})[:12] in str(raised.value)
    assert "widget w-1 with a different request body" in str(raised.value)


def test_the_loser_of_a_concurrent_binding_answers_as_the_winners_replay(aws: Aws) -> None:
    created: list[str] = []
    accept(aws, "k-3", {"a": "1"}, created)
    request_keys = keys(aws)
    original = request_keys.get
    reads = {"n": 0}

    def first_read_misses(key: str) -> RequestKeyRecord | None:
        reads["n"] += 1
        return None if reads["n"] == 1 else original(key)

    request_keys.get = first_read_misses  # type: ignore[method-assign]

    def create(bind):  # type: ignore[no-untyped-def]
        apply_writes(bind("w-loser"), ddb_client=aws.ddb)
        return "w-loser", False

    answer = request_keys.accept_once(
        "k-3", request_sha256({"a": "1"}), ttl_days=1, create=create, replay=lambda r: (r.entity_id, True)
    )

    assert answer == ("w-1", True)


def test_without_a_key_every_request_creates_and_nothing_is_bound(aws: Aws) -> None:
    created: list[str] = []
    accept(aws, None, {"a": "1"}, created)
    accept(aws, None, {"a": "1"}, created)

    assert created == ["w-1", "w-2"]
    assert aws.ddb.scan(TableName=aws.table)["Count"] == 0
