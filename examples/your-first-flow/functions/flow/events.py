"""The flow's events: what travels on the tasks queue, as Relay envelopes (``relay.envelope``).
Standard library only: the CDK stack imports it too (the schedule's message names ``TICK_DUE``)."""

from __future__ import annotations

from typing import Final

# POST /tasks asks for a task: ids.taskId, payload.title. Its eventId derives from the task id, so a
# client's retry of the same POST is the same event, done once.
TASK_SUBMITTED: Final = "TaskSubmitted"
# The hourly schedule's message: ids.scheduledTime (Scheduler's <aws.scheduler.scheduled-time>).
TICK_DUE: Final = "TickDue"
