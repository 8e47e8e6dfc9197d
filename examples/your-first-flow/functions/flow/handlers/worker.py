"""Worker: the tasks queue (TaskSubmitted from the API, TickDue from the hourly schedule) -> one
conditional write per message, partial batch failures, poison parked. Domain: ``flow.worker_steps``."""

from __future__ import annotations

from flow.settings import WORKER
from flow.wiring import wiring
from flow.worker_steps import process
from relay.consumer import queue_handler

handler = queue_handler(
    wiring.checked(WORKER), lambda w, envelope, _ctx: process(envelope, w.tasks, now=w.clock())
)
