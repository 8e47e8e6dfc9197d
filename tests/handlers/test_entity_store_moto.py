"""The kernel's processed-event marker (``relay.idempotency.commit_once``, ``already_processed``: the
scores job's record), on moto DynamoDB, read back through an entity store (``relay.entity_store``): the
early duplicate exit checks the payload hash, so a conflicting replay is a PayloadConflict before any
work, not a duplicate."""

from __future__ import annotations

import pytest

from relay.ddb import put
from relay.entity_store import EntityStore
from relay.errors import PayloadConflict
from relay.idempotency import CommitResult, already_processed, commit_once
from tests.builders import envelope
from tests.handlers.moto_env import Aws


class WidgetStore(EntityStore):
    ENTITY = "widget"
    ID_ATTRIBUTE = "widgetId"
    NEW_ONE = "a new widget"


def store(aws: Aws) -> WidgetStore:
    return WidgetStore(table_name=aws.table, idempotency_table=aws.table, ddb_client=aws.ddb)


def test_an_event_is_processed_once_and_its_replay_exits_early(aws: Aws) -> None:
    widgets = store(aws)
    event = envelope("WidgetMade", identity=["w-1"], payload={"colour": "red"})

    assert already_processed(event, table_name=aws.table, ddb_client=aws.ddb) is False
    assert (
        commit_once(
            event,
            [put(aws.table, {"id": "widget#w-1", "colour": "red"})],
            table_name=aws.table,
            ddb_client=aws.ddb,
        )
        is CommitResult.APPLIED
    )
    assert already_processed(event, table_name=aws.table, ddb_client=aws.ddb) is True
    assert widgets.read({"id": "widget#w-1"}) == {"id": "widget#w-1", "colour": "red"}


def test_a_replay_with_another_payload_is_a_payload_conflict_at_the_early_exit(aws: Aws) -> None:
    widgets = store(aws)
    first = envelope("WidgetMade", identity=["w-2"], payload={"colour": "red"})
    commit_once(
        first,
        [put(aws.table, {"id": "widget#w-2", "colour": "red"})],
        table_name=aws.table,
        ddb_client=aws.ddb,
    )
    tampered = first.model_copy(update={"payload": {"colour": "blue"}})

    with pytest.raises(PayloadConflict, match=f"event {first.event_id} was already processed"):
        already_processed(tampered, table_name=aws.table, ddb_client=aws.ddb)
    assert widgets.read({"id": "widget#w-2"}) == {"id": "widget#w-2", "colour": "red"}
