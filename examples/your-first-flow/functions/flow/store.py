"""Data access for the tasks table -- the ONLY module that knows its attribute names and key shapes.

Tasks table (``TASKS_TABLE``; pk/sk):

* a task: ``pk = TASK#<taskId>, sk = TASK`` -- ``taskId``, ``title``, ``status`` (DONE), ``doneAt``,
  ``version`` (1: written once), ``seen`` (the event that wrote it), ``expiresAt`` (TTL);
* a tick: ``pk = TICK#<scheduledTime>, sk = TICK`` -- ``scheduledTime``, ``recordedAt``, ``seen``,
  ``expiresAt``.

Each item is written once, by ONE conditional UpdateItem that also records the event that wrote it
(``seen``: its eventId and payload hash, ``relay.entity_events``), so a redelivery finds itself there.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from relay import entity_events
from relay.ddb import BusinessWrite, OnConditionFailed, epoch_seconds
from relay.entity_store import EntityStore
from relay.envelope import Envelope
from relay.expressions import Condition, Update
from relay.state_machine import now_iso

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

DONE = "DONE"
# Clean-up never depends on the happy path: DynamoDB's TTL deletes what is done after this.
KEEP = timedelta(days=30)


def task_key(task_id: str) -> dict[str, str]:
    return {"pk": f"TASK#{task_id}", "sk": "TASK"}


def tick_key(scheduled_time: str) -> dict[str, str]:
    return {"pk": f"TICK#{scheduled_time}", "sk": "TICK"}


@dataclass(frozen=True)
class Task:
    task_id: str
    title: str
    status: str
    done_at: str
    version: int
    seen: dict[str, str]


def _recorded(update: Update, cause: Envelope) -> Update:
    return update.set(entity_events.SEEN_ATTRIBUTE, {cause.event_id: entity_events.payload_hash(cause)})


class TaskStore(EntityStore):
    ENTITY = "task"
    ID_ATTRIBUTE = "taskId"
    NEW_ONE = "a new task"

    def __init__(self, *, table_name: str, ddb_client: DynamoDBClient) -> None:
        super().__init__(table_name=table_name, idempotency_table=None, ddb_client=ddb_client)

    def task(self, task_id: str) -> Task | None:
        item = self.read(task_key(task_id))
        if item is None:
            return None
        return Task(
            task_id=str(item["taskId"]),
            title=str(item["title"]),
            status=str(item["status"]),
            done_at=str(item["doneAt"]),
            version=int(item["version"]),
            seen=dict(item.get(entity_events.SEEN_ATTRIBUTE) or {}),
        )

    def done_write(
        self,
        task_id: str,
        title: str,
        cause: Envelope,
        *,
        at: datetime,
        on_condition_failed: OnConditionFailed,
    ) -> BusinessWrite:
        """The task, DONE, unless it is done already (the condition)."""
        update = Update().set_all(
            {
                "taskId": task_id,
                "title": title,
                "status": DONE,
                "doneAt": now_iso(at),
                "expiresAt": epoch_seconds(at + KEEP),
            }
        )
        return _recorded(update.add("version", 1), cause).write(
            self.table_name,
            task_key(task_id),
            condition=Condition().not_exists("status"),
            on_condition_failed=on_condition_failed,
        )

    def tick_write(
        self, scheduled_time: str, cause: Envelope, *, at: datetime, on_condition_failed: OnConditionFailed
    ) -> BusinessWrite:
        """The tick of ``scheduled_time``, unless it is recorded already (the condition)."""
        update = Update().set_all(
            {
                "scheduledTime": scheduled_time,
                "recordedAt": now_iso(at),
                "expiresAt": epoch_seconds(at + KEEP),
            }
        )
        return _recorded(update, cause).write(
            self.table_name,
            tick_key(scheduled_time),
            condition=Condition().not_exists("recordedAt"),
            on_condition_failed=on_condition_failed,
        )
