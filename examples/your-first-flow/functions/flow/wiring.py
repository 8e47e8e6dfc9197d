"""What a flow function is wired with: its settings, its AWS clients, the tasks store.

Built once per process on first use (``relay.wiring``). The API answers a client: its SQS client fails
fast (a 503 the client retries) rather than let the SDK's retries outlast the caller.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from flow.settings import Settings
from flow.store import TaskStore
from relay.clients import AwsClients, aws_client
from relay.steps import Clock, utc_now
from relay.wiring import Wired

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


class Wiring(AwsClients):
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @functools.cached_property
    def api_sqs(self) -> SQSClient:
        return aws_client("sqs", fast=True)

    @functools.cached_property
    def tasks(self) -> TaskStore:
        return TaskStore(table_name=self.settings.require("tasks_table"), ddb_client=self.ddb)

    @property
    def clock(self) -> Clock:
        return utc_now


wiring = Wired(lambda: Wiring(Settings.from_env()))
