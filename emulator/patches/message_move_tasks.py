"""DLQ redrive: SQS's StartMessageMoveTask, ListMessageMoveTasks and CancelMessageMoveTask (patch 10).

moto's behaviour: moto 5.2 has no message move tasks: ``SQSResponse`` (moto/sqs/responses.py) has no
``start_message_move_task``, ``list_message_move_tasks`` or ``cancel_message_move_task``, so
``BaseResponse.call_action`` (moto/core/responses.py) raises ``NotImplementedError`` ("The
start_message_move_task action has not been implemented"): an HTTP 500 from moto's server, the
exception itself under ``mock_aws``. A DLQ cannot be redriven through the API.

AWS's behaviour: a task moves the messages of a DLQ asynchronously, at most
``MaxNumberOfMessagesPerSecond``, to ``DestinationArn`` or, without one, back to the queue each message
came from; one active task per source queue; ListMessageMoveTasks answers the most recent tasks with
their counts and status; CancelMessageMoveTask cancels a running one
(https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_StartMessageMoveTask.html,
https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-configure-dead-letter-queue-redrive.html).
The patch adds the three operations to moto's SQS handler, in SQS's JSON protocol, with the answers
AWS gives (see ``_MoveTasks``); a task moves messages in a background thread of the server process,
each one a new message (new id, never received). For a redrive to each message's original source queue,
each moto message remembers the queue it was first enqueued in (``Queue.add_message``): moto's redrive
policy moves the message object itself, so in a DLQ it still names its source. A message sent to the
DLQ directly (a consumer's parking, SNS's dead-lettering) has no other source: as on AWS, such a task
FAILS with ``CouldNotDetermineMessageSource`` when it reaches one; redrive those with a
``DestinationArn``.

Upstream: yes. DLQ redrive is a documented SQS API that moto users cannot test at all; the operations,
their errors (recorded against AWS by LocalStack's snapshot tests) and a source remembered per message
are a self-contained addition to moto's SQS. ``docs/upstream/message_move_tasks.md``.

Patches: moto 5.2.5, ``Queue.add_message`` (wrapped) and three methods added to ``SQSResponse``; it
calls ``SQSBackend.receive_message``, ``send_message``, ``delete_message``,
``change_message_visibility`` and ``list_dead_letter_source_queues``.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

PATCHES = {"moto": "5.2.5"}


# The attribute in which each moto message keeps the ARN of the queue it was first enqueued in.
_ENQUEUED_IN = "_relay_enqueued_in"
# A message being moved is invisible in the DLQ this long; a move that fails makes it visible at once.
_MOVE_VISIBILITY_SECONDS = 30
# ListMessageMoveTasks answers at most the 10 most recent tasks of a source queue: older ones are dropped.
_TASKS_KEPT = 10
_MAX_RATE = 500
_ACTIVE = ("RUNNING", "CANCELLING")
_NON_EXISTENT_QUEUE = "AWS.SimpleQueueService.NonExistentQueue"


class _SqsError(Exception):
    """An SQS error answer: the code botocore surfaces as ``Error.Code``, the message, the HTTP status."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def _invalid(message: str) -> _SqsError:
    return _SqsError("InvalidParameterValue", message)


class _TaskFailed(Exception):
    """Ends a running task in FAILED; the argument is its ``FailureReason``."""


@dataclass
class _MoveTask:
    task_id: str
    source_arn: str
    source: Any  # the moto Queue: a queue deleted and created again is another object, without tasks
    destination_arn: str | None
    rate: int | None  # MaxNumberOfMessagesPerSecond, None: as fast as the server goes
    started_at: float  # time.time()
    to_move: int
    moved: int = 0
    status: str = "RUNNING"
    failure_reason: str | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)
    # Held for each move and by Cancel: once Cancel has answered, no further message moves.
    lock: threading.Lock = field(default_factory=threading.Lock)
    clock_start: float = field(default_factory=time.monotonic)

    @property
    def handle(self) -> str:
        """AWS's format: base64 of ``{"taskId": ..., "sourceArn": ...}`` (``emulator.iam_requests``
        reads it)."""
        doc = json.dumps({"taskId": self.task_id, "sourceArn": self.source_arn}, separators=(",", ":"))
        return base64.b64encode(doc.encode()).decode()

    def entry(self) -> dict[str, Any]:
        """The task as a ListMessageMoveTasksResultEntry."""
        with self.lock:
            entry: dict[str, Any] = {
                "Status": self.status,
                "SourceArn": self.source_arn,
                "ApproximateNumberOfMessagesMoved": self.moved,
                "ApproximateNumberOfMessagesToMove": self.to_move,
                "StartedTimestamp": int(self.started_at * 1000),
            }
            if self.status == "RUNNING":  # AWS returns the handle only while the task runs
                entry["TaskHandle"] = self.handle
            if self.destination_arn is not None:
                entry["DestinationArn"] = self.destination_arn
            if self.rate is not None:
                entry["MaxNumberOfMessagesPerSecond"] = self.rate
            if self.failure_reason is not None:
                entry["FailureReason"] = self.failure_reason
        return entry


def _arn_parts(arn: Any, parameter: str) -> tuple[str, str, str]:
    """(account, region, queue name) of an SQS queue ARN parameter."""
    parts = arn.split(":") if isinstance(arn, str) else []
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "sqs" or not all(parts[3:]):
        raise _invalid(
            f"You must use this format to specify the {parameter}: "
            "arn:<partition>:<service>:<region>:<account-id>:<resource-id>"
        )
    return parts[4], parts[3], parts[5]


def _queue_at(arn: Any, parameter: str) -> tuple[Any, Any]:
    """(backend, queue) named by a queue ARN parameter, or the error SQS answers."""
    from moto.sqs.models import sqs_backends

    account, region, name = _arn_parts(arn, parameter)
    try:
        backend = sqs_backends[account][region]
        queue = backend.queues.get(name)
    except KeyError:  # a region moto does not know
        queue = None
    if queue is None:
        raise _SqsError(
            "ResourceNotFoundException",
            f"The resource that you specified for the {parameter} parameter doesn't exist.",
            404,
        )
    return backend, queue


class _MoveTasks:
    """The server's move tasks, newest first per source queue ARN.

    The errors are the ones AWS answers, as LocalStack's snapshot tests recorded them against AWS
    (tests/aws/services/sqs/test_sqs_move_task.snapshot.json): a source that is not a DLQ, a second
    task while one is active, a destination or source that does not exist, a task handle that cannot
    be read or names no task. Not recorded, so code and wording are the sandbox's: a malformed ARN, a
    rate or MaxResults out of range, a destination of the other queue type or equal to the source,
    and cancelling a task that no longer runs (AWS: "only when the current status is RUNNING")."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_source: dict[str, list[_MoveTask]] = {}

    def _tasks(self, source_arn: str, source: Any) -> list[_MoveTask]:
        return [t for t in self.by_source.get(source_arn, []) if t.source is source]

    def start(self, source_arn: Any, destination_arn: Any, rate: Any) -> str:
        backend, source = _queue_at(source_arn, "SourceArn")
        if rate is not None and not (isinstance(rate, int) and 1 <= rate <= _MAX_RATE):
            raise _invalid(
                f"Value {rate} for parameter MaxNumberOfMessagesPerSecond is invalid. "
                f"Reason: You must enter a number that's between 1 and {_MAX_RATE}."
            )
        if not backend.list_dead_letter_source_queues(source.name):
            raise _invalid("Source queue must be configured as a Dead Letter Queue.")
        if destination_arn:
            _, destination = _queue_at(destination_arn, "DestinationArn")
            if destination is source:
                raise _invalid("Source queue arn and destination queue arn cannot be the same.")
            if bool(destination.fifo_queue) != bool(source.fifo_queue):
                raise _invalid("The source queue and destination queue must be of the same queue type.")
        with self.lock:
            tasks = self._tasks(source_arn, source)
            if any(t.status in _ACTIVE for t in tasks):
                raise _invalid(
                    "There is already a task running. Only one active task is allowed for a source queue "
                    "arn at a given time."
                )
            task = _MoveTask(
                task_id=str(uuid.uuid4()),
                source_arn=source_arn,
                source=source,
                destination_arn=destination_arn or None,
                rate=rate,
                started_at=time.time(),
                to_move=int(source.approximate_number_of_messages),
            )
            self.by_source[source_arn] = [task, *tasks][:_TASKS_KEPT]
        worker = threading.Thread(target=_run_move_task, args=(task,), name=f"move-task-{task.task_id}")
        worker.daemon = True
        worker.start()
        return task.handle

    def list(self, source_arn: Any, max_results: Any) -> list[dict[str, Any]]:
        _, source = _queue_at(source_arn, "SourceArn")
        count = 1 if max_results is None else max_results
        if not (isinstance(count, int) and 1 <= count <= _TASKS_KEPT):
            raise _invalid(
                f"Value {max_results} for parameter MaxResults is invalid. "
                f"Reason: You must enter a number that's between 1 and {_TASKS_KEPT}."
            )
        with self.lock:
            tasks = self._tasks(source_arn, source)[:count]
        return [t.entry() for t in tasks]

    def cancel(self, handle: Any) -> int:
        try:
            doc = json.loads(base64.b64decode(str(handle), validate=True))
            task_id, source_arn = str(doc["taskId"]), str(doc["sourceArn"])
        except (ValueError, TypeError, KeyError):  # binascii.Error and UnicodeDecodeError are ValueErrors
            raise _invalid("Value for parameter TaskHandle is invalid.") from None
        _, source = _queue_at(source_arn, "SourceArn")
        with self.lock:
            task = next((t for t in self._tasks(source_arn, source) if t.task_id == task_id), None)
        if task is None:
            raise _SqsError("ResourceNotFoundException", "Task does not exist.", 404)
        with task.lock:
            if task.status != "RUNNING":
                raise _SqsError(
                    "AWS.SimpleQueueService.UnsupportedOperation",
                    f"Only a task in status RUNNING can be cancelled; task {task_id} is {task.status}.",
                )
            task.status = "CANCELLING"
            task.cancelled.set()
            return task.moved

    def stop_all(self) -> None:
        with self.lock:
            tasks = [t for ts in self.by_source.values() for t in ts]
            self.by_source.clear()
        for task in tasks:
            task.cancelled.set()


MOVE_TASKS = _MoveTasks()


def _run_move_task(task: _MoveTask) -> None:
    """Move the task's messages one at a time, the k-th no earlier than k / rate seconds after the
    start; stop when ``to_move`` have moved (a message parked again meanwhile is not chased round),
    the DLQ has no visible message left, the task is cancelled, or a move fails."""
    failure: str | None = None
    try:
        while True:
            with task.lock:
                if task.cancelled.is_set() or task.moved >= task.to_move:
                    break
                due = task.clock_start + task.moved / task.rate if task.rate else 0.0
            wait = due - time.monotonic()
            if wait > 0 and task.cancelled.wait(wait):
                break
            with task.lock:
                if task.cancelled.is_set() or not _move_one(task):
                    break
                task.moved += 1
    except _TaskFailed as failed:
        failure = str(failed)
    except Exception as exc:  # a bug here: keep the server up, and say so
        failure = type(exc).__name__
        print(f"move task {task.task_id} ({task.source_arn}) failed: {exc!r}", file=sys.stderr)
    with task.lock:
        if failure is not None:
            task.status, task.failure_reason = "FAILED", failure
        else:
            task.status = "CANCELLED" if task.cancelled.is_set() else "COMPLETED"


def _move_one(task: _MoveTask) -> bool:
    """Receive one message from the DLQ, send its body and message attributes to the destination as a
    new message, delete it from the DLQ. False when the DLQ has no visible message."""
    from moto.sqs.models import sqs_backends

    account, region, name = _arn_parts(task.source_arn, "SourceArn")
    backend = sqs_backends[account][region]
    if backend.queues.get(name) is not task.source:
        raise _TaskFailed(_NON_EXISTENT_QUEUE)
    received = backend.receive_message(name, 1, 0, _MOVE_VISIBILITY_SECONDS, ["All"])
    if not received:
        return False
    message = received[0]
    receipt = str(message.receipt_handle)
    try:
        destination = task.destination_arn or _original_source(message, task.source_arn)
        if destination is None:
            raise _TaskFailed("CouldNotDetermineMessageSource")
        _send_moved(message, destination)
    except BaseException:
        backend.change_message_visibility(name, receipt, visibility_timeout=0)  # left as it was
        raise
    backend.delete_message(name, receipt)
    return True


def _original_source(message: Any, dlq_arn: str) -> str | None:
    """The queue moto's redrive policy moved ``message`` out of; None for a message sent to the DLQ."""
    enqueued_in = getattr(message, _ENQUEUED_IN, None)
    return enqueued_in if enqueued_in and enqueued_in != dlq_arn else None


def _send_moved(message: Any, destination_arn: str) -> None:
    from moto.sqs.models import sqs_backends

    account, region, name = _arn_parts(destination_arn, "DestinationArn")
    try:
        backend = sqs_backends[account][region]
        queue = backend.queues.get(name)
    except KeyError:
        queue = None
    if queue is None:
        raise _TaskFailed(_NON_EXISTENT_QUEUE)
    # A new message: new id, sent now, never received (AWS: "considered new messages").
    fifo = {"group_id": message.group_id, "deduplication_id": message.deduplication_id or message.id}
    backend.send_message(
        name,
        message.body,
        message_attributes=dict(message.message_attributes) or None,
        system_attributes=dict(message.system_attributes) or None,
        **(fifo if queue.fifo_queue else {}),
    )


def _sqs_answer(call: Callable[[], dict[str, Any]]) -> Any:
    """The handler's answer: the result for moto's serializer, or the error as SQS's JSON protocol
    carries it (botocore takes the code from the query-compatibility header)."""
    from moto.core.responses import ActionResult

    try:
        return ActionResult(call())
    except _SqsError as error:
        body = json.dumps({"__type": f"com.amazonaws.sqs#{error.code}", "message": error.message})
        headers = {
            "status": error.status,
            "Content-Type": "application/x-amz-json-1.0",
            "x-amzn-query-error": f"{error.code};Sender",
        }
        return body, headers


def _start_message_move_task(self: Any) -> Any:
    return _sqs_answer(
        lambda: {
            "TaskHandle": MOVE_TASKS.start(
                self._get_param("SourceArn"),
                self._get_param("DestinationArn"),
                self._get_param("MaxNumberOfMessagesPerSecond"),
            )
        }
    )


def _list_message_move_tasks(self: Any) -> Any:
    return _sqs_answer(
        lambda: {"Results": MOVE_TASKS.list(self._get_param("SourceArn"), self._get_param("MaxResults"))}
    )


def _cancel_message_move_task(self: Any) -> Any:
    return _sqs_answer(
        lambda: {"ApproximateNumberOfMessagesMoved": MOVE_TASKS.cancel(self._get_param("TaskHandle"))}
    )


_MOVE_TASK_OPERATIONS = {
    "start_message_move_task": _start_message_move_task,
    "list_message_move_tasks": _list_message_move_tasks,
    "cancel_message_move_task": _cancel_message_move_task,
}


def install() -> Callable[[], None]:
    """Install patch 10; returns a function that removes it (and stops the tasks still running).
    Install it before the server answers its first request: patch 4 caches the handler's methods."""
    from moto.sqs.models import Queue
    from moto.sqs.responses import SQSResponse

    original_add_message = Queue.add_message

    def add_message(self: Any, message: Any) -> None:
        if getattr(message, _ENQUEUED_IN, None) is None:
            setattr(message, _ENQUEUED_IN, self.queue_arn)
        original_add_message(self, message)

    Queue.add_message = add_message  # type: ignore[method-assign]
    for name, operation in _MOVE_TASK_OPERATIONS.items():
        setattr(SQSResponse, name, operation)

    def remove() -> None:
        Queue.add_message = original_add_message  # type: ignore[method-assign]
        for name in _MOVE_TASK_OPERATIONS:
            delattr(SQSResponse, name)
        MOVE_TASKS.stop_all()

    return remove
