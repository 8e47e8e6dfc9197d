"""The API's side: a task asked for is one ``TaskSubmitted`` event sent to the tasks queue.

One SendMessage and nothing else, so there is no second write to lose: the task is the worker's to do.
The eventId derives from the task id (``relay.envelope.new_envelope``), so a client's retry of the same
POST sends the same event, and the worker does it once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flow.events import TASK_SUBMITTED
from relay.envelope import Envelope, new_envelope
from relay.errors import classify

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


def submit_task(
    task_id: str, title: str, *, sqs_client: SQSClient, queue_url: str, correlation_id: str
) -> Envelope:
    envelope = new_envelope(
        TASK_SUBMITTED,
        identity=[task_id],
        ids={"taskId": task_id},
        payload={"title": title},
        correlation_id=correlation_id,
    )
    try:
        sqs_client.send_message(QueueUrl=queue_url, MessageBody=envelope.to_json())
    except Exception as exc:
        # Throttling, timeouts, 5xx -> TransientError, which the API answers 503 (retry).
        error = classify(exc)
        if error is exc:
            raise
        raise error from exc
    return envelope
