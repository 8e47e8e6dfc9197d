"""In-memory stand-ins for the AWS clients the kernel calls (unit tests stay socket-free)."""

from __future__ import annotations

import threading
from typing import Any


class FakeSqs:
    """Records SendMessage / ChangeMessageVisibility calls; ``fail_*`` makes them raise."""

    class meta:
        endpoint_url = "https://sqs.us-east-1.amazonaws.com"

    def __init__(self, *, fail_send: bool = False, fail_visibility: bool = False) -> None:
        self.sent: list[dict[str, Any]] = []
        self.visibility: list[dict[str, Any]] = []
        self.fail_send = fail_send
        self.fail_visibility = fail_visibility
        self.visibility_called = threading.Event()

    def send_message(self, **params: Any) -> dict[str, Any]:
        if self.fail_send:
            raise ConnectionError("DLQ unreachable")
        self.sent.append(params)
        return {"MessageId": f"dlq-{len(self.sent)}"}

    def change_message_visibility(self, **params: Any) -> dict[str, Any]:
        if self.fail_visibility:
            self.visibility_called.set()
            raise ConnectionError("SQS unreachable")
        self.visibility.append(params)
        self.visibility_called.set()
        return {}
