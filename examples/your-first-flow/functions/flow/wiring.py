"""What a flow function is wired with: its settings, its AWS clients, the tasks store.

Built once per process on first use (``relay.wiring``). The API answers a client: its SQS client fails
fast (a 503 the client retries) rather than let the SDK's retries outlast the caller.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from flow.settings import Settings
from flow.store import TaskStore
from relay.clients import aws_client
from relay.wiring import ServiceWiring, Wired

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


class Wiring(ServiceWiring[Settings]):
    @functools.cached_property
    def api_sqs(self) -> SQSClient:
        return aws_client("sqs", fast=True)

    @functools.cached_property
    def tasks(self) -> TaskStore:
        return TaskStore(table_name=self.settings.require("tasks_table"), ddb_client=self.ddb)


wiring = Wired(lambda: Wiring(Settings.from_env()))
