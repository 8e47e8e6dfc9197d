"""The flow functions' settings and, per function, the ones it needs (``relay.settings``: the stack
builds each function's environment from this declaration, the function checks it at cold start)."""

from __future__ import annotations

from typing import ClassVar

from relay.settings import FunctionEnvironment, ServiceSettings


class Settings(ServiceSettings):
    SERVICE: ClassVar[str] = "flow"

    tasks_table: str | None = None
    tasks_queue_url: str | None = None


API = FunctionEnvironment(Settings, "api", required=("tasks_queue_url",))
WORKER = FunctionEnvironment(Settings, "worker", required=("tasks_table",))
