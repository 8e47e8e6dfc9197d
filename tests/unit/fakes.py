"""In-memory stand-ins for the AWS clients the kernel calls (unit tests stay socket-free)."""

from __future__ import annotations

import threading
from typing import Any


class FakeSqs:
    """Records SendMessage / ChangeMessageVisibility calls; ``fail_*`` makes them raise."""

    class meta:
        endpoint_url = "https://sqs.us-east-1.amazonaws.com"

    def __init__(
        self, *, fail_send: bool = False, fail_visibility: bool = False, max_message_bytes: int | None = None
    ) -> None:
        self.sent: list[dict[str, Any]] = []
        # SQS's MaximumMessageSize, counted as SQS counts it: the body and every attribute's name,
        # data type and value (the emulator compares the body alone).
        self.max_message_bytes = max_message_bytes
        self.visibility: list[dict[str, Any]] = []
        self.fail_send = fail_send
        self.fail_visibility = fail_visibility
        self.visibility_called = threading.Event()

    def send_message(self, **params: Any) -> dict[str, Any]:
        if self.fail_send:
            raise ConnectionError("DLQ unreachable")
        if self.max_message_bytes is not None and message_size(params) > self.max_message_bytes:
            from botocore.exceptions import ClientError

            reason = f"Message must be shorter than {self.max_message_bytes} bytes."
            error = {
                "Code": "InvalidParameterValue",
                "Message": f"One or more parameters are invalid. Reason: {reason}",
            }
            raise ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}, "SendMessage")
        self.sent.append(params)
        return {"MessageId": f"dlq-{len(self.sent)}"}

    def change_message_visibility(self, **params: Any) -> dict[str, Any]:
        if self.fail_visibility:
            self.visibility_called.set()
            raise ConnectionError("SQS unreachable")
        self.visibility.append(params)
        self.visibility_called.set()
        return {}


def message_size(params: dict[str, Any]) -> int:
    size = len(str(params.get("MessageBody", "")).encode("utf-8"))
    for name, attribute in (params.get("MessageAttributes") or {}).items():
        value = attribute.get("StringValue")
        raw = value.encode("utf-8") if value is not None else bytes(attribute.get("BinaryValue", b""))
        size += len(name.encode("utf-8")) + len(str(attribute["DataType"]).encode("utf-8")) + len(raw)
    return size
