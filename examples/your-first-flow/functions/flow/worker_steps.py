"""The worker's steps: what each event on the tasks queue does, in ONE conditional write.

* ``TaskSubmitted`` -> the task, DONE. The kernel's step skeleton (``relay.steps``): ``expect`` the
  event and its ``ids.taskId`` (else parked, InvalidInput); read the task; ``duplicate``: the task
  records this very event, so it is acknowledged without effect (the same eventId with another
  payload is a PayloadConflict: parked, never applied); then ``commit`` the one write, conditional on
  the task not being done. A failed condition means a concurrent delivery won: ``already``,
  acknowledged.
* ``TickDue`` (the hourly schedule; Scheduler delivers at least once) -> the tick of its scheduled
  time, recorded once. No read first: the write's condition alone tells a second delivery.

Anything else is parked with the reason. Steps decide; ``flow.store`` owns the table and its writes.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from flow.events import TASK_SUBMITTED, TICK_DUE
from flow.store import TaskStore
from relay import steps
from relay.envelope import Envelope
from relay.errors import InvalidInput
from relay.observability import logger, record_metric

CONSUMER = "the flow worker"


def complete_task(envelope: Envelope, store: TaskStore, now: datetime) -> None:
    task_id = steps.expect(
        envelope, TASK_SUBMITTED, entity_id="taskId", consumer=CONSUMER, routed_by="producer (POST /tasks)"
    )
    title = (envelope.payload or {}).get("title")
    if not isinstance(title, str) or not title:
        raise InvalidInput(f"event {envelope.event_id} ({envelope.event_type}) has no payload.title")
    task = store.task(task_id)
    if task is not None and steps.duplicate(task.seen, envelope, task_id=task_id):
        return
    if task is not None:
        steps.acknowledge(envelope, "task already done by another event", task_id=task_id)
        return
    write = store.done_write(
        task_id, title, envelope, at=now, on_condition_failed=steps.already(f"task {task_id} is already done")
    )
    if steps.commit(lambda: store.apply_one(write), envelope, task_id=task_id):
        record_metric("TaskDone", event_type=envelope.event_type)
        logger().info("task done", extra={"task_id": task_id})


def record_tick(envelope: Envelope, store: TaskStore, now: datetime) -> None:
    scheduled_time = steps.expect(
        envelope, TICK_DUE, entity_id="scheduledTime", consumer=CONSUMER, routed_by="tick schedule"
    )
    write = store.tick_write(
        scheduled_time,
        envelope,
        at=now,
        on_condition_failed=steps.already(f"the tick of {scheduled_time} is recorded already"),
    )
    if steps.commit(lambda: store.apply_one(write), envelope, scheduled_time=scheduled_time):
        logger().info("tick recorded", extra={"scheduled_time": scheduled_time})


STEPS: dict[str, Callable[[Envelope, TaskStore, datetime], None]] = {
    TASK_SUBMITTED: complete_task,
    TICK_DUE: record_tick,
}


def process(envelope: Envelope, store: TaskStore, *, now: datetime) -> None:
    """The step for ``envelope``'s type; any other type is parked with the reason."""
    step = STEPS.get(envelope.event_type)
    if step is None:
        raise InvalidInput(
            f"event {envelope.event_id} has eventType {envelope.event_type}; {CONSUMER} handles "
            f"{' and '.join(STEPS)}. Check the producer."
        )
    step(envelope, store, now)
