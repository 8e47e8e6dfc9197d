"""Event source mappings: the pollers Lambda runs for SQS queues and DynamoDB streams.

SQS (https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html):
* ``MaximumConcurrency`` pollers per mapping, each long-polling ``ReceiveMessage``;
* a batch is gathered until ``BatchSize`` messages or ``MaximumBatchingWindowInSeconds`` elapse;
* after the invocation only the successes are deleted: with ``ReportBatchItemFailures`` every
  message not named in ``batchItemFailures``; an exception, a timeout or a malformed response
  fails the whole batch (nothing deleted). Failed messages become visible again after the
  visibility timeout and the queue's redrive policy moves them to the DLQ: both are left to the
  emulator, as Lambda leaves them to SQS.
* FIFO: SQS itself hands out one group's messages to one consumer at a time; the poller keeps
  the received order in the event.

DynamoDB streams (https://docs.aws.amazon.com/lambda/latest/dg/with-ddb.html): one poller per
shard, records in order, a failed batch retried (from the lowest failed ``SequenceNumber`` with
``ReportBatchItemFailures``) until ``MaximumRetryAttempts``, then the batch's description goes to
the ``OnFailure`` destination and the shard moves on.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from local.emulator import REGION, client
from local.provision import MappingSpec
from local.runtime import InvokeResult, Runtime

Log = Callable[[str], None]


def _queue_url(endpoint: str, arn: str) -> str:
    _, _, _, _, account, name = arn.split(":")
    return f"{endpoint}/{account}/{name}"


def sqs_record(message: dict[str, Any], source_arn: str) -> dict[str, Any]:
    """A ReceiveMessage result in the shape Lambda passes to the function (camelCase keys)."""
    attributes = {k: str(v) for k, v in message.get("Attributes", {}).items()}
    message_attributes = {}
    for name, value in message.get("MessageAttributes", {}).items():
        binary = value.get("BinaryValue")
        message_attributes[name] = {
            "stringValue": value.get("StringValue"),
            "binaryValue": base64.b64encode(binary).decode() if binary is not None else None,
            "stringListValues": value.get("StringListValues", []),
            "binaryListValues": [base64.b64encode(b).decode() for b in value.get("BinaryListValues", [])],
            "dataType": value.get("DataType"),
        }
    record = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message.get("Body", ""),
        "attributes": attributes,
        "messageAttributes": message_attributes,
        "md5OfBody": message.get("MD5OfBody"),
        "eventSource": "aws:sqs",
        "eventSourceARN": source_arn,
        "awsRegion": REGION,
    }
    if "MD5OfMessageAttributes" in message:
        record["md5OfMessageAttributes"] = message["MD5OfMessageAttributes"]
    return record


def failed_item_ids(result: InvokeResult, ids: list[str], partial: bool) -> set[str]:
    """The identifiers Lambda treats as failed after an invocation (all of them on any doubt)."""
    everything = set(ids)
    if not result.ok:
        return everything
    if not partial:
        return set()
    payload = result.payload
    # An empty or null response, or an empty list, means the whole batch succeeded.
    if payload is None or payload == {} or payload == "":
        return set()
    if not isinstance(payload, dict):
        return everything
    failures = payload.get("batchItemFailures")
    if failures is None:
        return set()
    if not isinstance(failures, list):
        return everything
    failed: set[str] = set()
    for item in failures:
        identifier = item.get("itemIdentifier") if isinstance(item, dict) else None
        # A missing, empty or unknown identifier is a malformed response: the whole batch fails.
        if not isinstance(identifier, str) or identifier not in everything:
            return everything
        failed.add(identifier)
    return failed


class MappingStats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.batches = 0
        self.records = 0
        self.failed_records = 0
        self.failed_batches = 0
        self.in_flight = 0

    def add(self, **changes: int) -> None:
        with self.lock:
            for name, delta in changes.items():
                setattr(self, name, getattr(self, name) + delta)


class SqsMapping:
    def __init__(
        self, spec: MappingSpec, runtime: Runtime, endpoint: str, stop: threading.Event, log: Log
    ) -> None:
        self.spec = spec
        self.runtime = runtime
        self.stop = stop
        self.log = log
        self.sqs = client("sqs", endpoint)
        self.queue_url = _queue_url(endpoint, spec.source_arn)
        self.stats = MappingStats()
        # Lambda starts with 5 pollers for a queue and scales; MaximumConcurrency caps the
        # concurrent invocations, which is what a poller count models here.
        self.pollers = int(spec.max_concurrency or 5)
        self.threads = [
            threading.Thread(target=self._poll, name=f"sqs-{spec.function[-20:]}-{i}", daemon=True)
            for i in range(self.pollers)
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def _receive(self, max_messages: int, wait: int) -> list[dict[str, Any]]:
        response = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=max(1, min(max_messages, 10)),
            WaitTimeSeconds=wait,
            AttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        return list(response.get("Messages", []))

    def _gather(self) -> list[dict[str, Any]]:
        # Long poll (short waits so shutdown stays prompt), then fill the batch until BatchSize or
        # the batching window closes, as Lambda does before it invokes.
        messages = self._receive(self.spec.batch_size, 2)
        if not messages or self.spec.batching_window <= 0:
            return messages
        closes = time.monotonic() + self.spec.batching_window
        while len(messages) < self.spec.batch_size and not self.stop.is_set():
            remaining = closes - time.monotonic()
            if remaining <= 0:
                break
            more = self._receive(self.spec.batch_size - len(messages), max(1, int(remaining)))
            if not more and time.monotonic() >= closes:
                break
            messages.extend(more)
        return messages

    def _poll(self) -> None:
        while not self.stop.is_set():
            try:
                messages = self._gather()
            except Exception as exc:
                if not self.stop.is_set():
                    self.log(f"sqs poller {self.spec.function}: receive failed: {exc}")
                    time.sleep(1)
                continue
            if not messages:
                continue
            self._process(messages)

    def _process(self, messages: list[dict[str, Any]]) -> None:
        records = [sqs_record(m, self.spec.source_arn) for m in messages]
        self.stats.add(batches=1, records=len(records), in_flight=len(records))
        try:
            result = self.runtime.invoke(self.spec.function, {"Records": records})
        finally:
            self.stats.add(in_flight=-len(records))
        ids = [r["messageId"] for r in records]
        failed = failed_item_ids(result, ids, self.spec.report_batch_item_failures)
        if not result.ok:
            self.log(
                f"{self.spec.function}: batch of {len(ids)} failed ({result.error_type}: "
                f"{result.error_message[:200]}); the messages return after their visibility timeout"
            )
        if failed:
            self.stats.add(failed_records=len(failed), failed_batches=1)
        done = [r for r in records if r["messageId"] not in failed]
        for start in range(0, len(done), 10):
            chunk = done[start : start + 10]
            try:
                self.sqs.delete_message_batch(
                    QueueUrl=self.queue_url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": r["receiptHandle"]} for i, r in enumerate(chunk)
                    ],
                )
            except Exception as exc:
                # Not deleted means delivered again: the at-least-once case consumers must handle.
                self.log(f"{self.spec.function}: DeleteMessageBatch failed: {exc}")


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    if isinstance(value, dt.datetime):
        return int(value.timestamp())
    if isinstance(value, set):
        return [_jsonable(v) for v in value]
    return value


class StreamMapping:
    """One poller per shard of a DynamoDB stream (moto exposes a single shard per table)."""

    def __init__(
        self, spec: MappingSpec, runtime: Runtime, endpoint: str, stop: threading.Event, log: Log
    ) -> None:
        self.spec = spec
        self.runtime = runtime
        self.stop = stop
        self.log = log
        self.streams = client("dynamodbstreams", endpoint)
        self.sqs = client("sqs", endpoint)
        self.endpoint = endpoint
        self.stats = MappingStats()
        self.retries = 0
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        shards = self.streams.describe_stream(StreamArn=self.spec.source_arn)["StreamDescription"]["Shards"]
        for shard in shards:
            thread = threading.Thread(
                target=self._poll,
                args=(shard["ShardId"],),
                name=f"stream-{shard['ShardId'][-8:]}",
                daemon=True,
            )
            self.threads.append(thread)
            thread.start()

    def _poll(self, shard_id: str) -> None:
        position = "LATEST" if self.spec.starting_position == "LATEST" else "TRIM_HORIZON"
        iterator = self.streams.get_shard_iterator(
            StreamArn=self.spec.source_arn, ShardId=shard_id, ShardIteratorType=position
        )["ShardIterator"]
        pending: list[dict[str, Any]] = []  # records fetched but not yet successfully processed
        attempts = 0
        while not self.stop.is_set():
            try:
                window_closes: float | None = None
                while len(pending) < self.spec.batch_size and not self.stop.is_set():
                    response = self.streams.get_records(
                        ShardIterator=iterator, Limit=self.spec.batch_size - len(pending)
                    )
                    iterator = response["NextShardIterator"]
                    records = response.get("Records", [])
                    pending.extend(_jsonable(r) for r in records)
                    if pending and window_closes is None:
                        window_closes = time.monotonic() + self.spec.batching_window
                    if window_closes is not None and time.monotonic() >= window_closes:
                        break
                    if not records:
                        # Lambda polls each shard about four times a second.
                        time.sleep(0.25 if not pending else min(0.1, self.spec.batching_window))
            except Exception as exc:
                if not self.stop.is_set():
                    self.log(f"stream poller {self.spec.function}: {exc}")
                    time.sleep(1)
                continue
            if not pending:
                continue
            batch = pending[: self.spec.batch_size]
            for record in batch:
                record["eventSourceARN"] = self.spec.source_arn
            self.stats.add(batches=1, records=len(batch), in_flight=len(batch))
            try:
                result = self.runtime.invoke(self.spec.function, {"Records": batch})
            finally:
                self.stats.add(in_flight=-len(batch))
            sequence = [r["dynamodb"]["SequenceNumber"] for r in batch]
            failed = failed_item_ids(result, sequence, self.spec.report_batch_item_failures)
            if not failed:
                pending = pending[len(batch) :]
                attempts = 0
                continue
            self.stats.add(failed_records=len(failed), failed_batches=1)
            # Checkpoint at the lowest failed sequence number: everything before it is done.
            lowest = min(failed, key=int)
            first_failed = sequence.index(lowest)
            retry = pending[first_failed:]
            attempts += 1
            self.retries += 1
            if attempts > self.spec.max_retry_attempts:
                self._on_failure(shard_id, batch[first_failed:], attempts, result)
                pending = pending[len(batch) :]
                attempts = 0
                continue
            pending = retry
            if not result.ok:
                self.log(f"{self.spec.function}: stream batch failed ({result.error_type}); retry {attempts}")
            # Lambda backs off between retries of a failing stream batch.
            self.stop.wait(min(0.5 * 2 ** (attempts - 1), 10))

    def _on_failure(
        self, shard_id: str, records: list[dict[str, Any]], attempts: int, result: InvokeResult
    ) -> None:
        if not self.spec.on_failure_arn:
            self.log(f"{self.spec.function}: dropped {len(records)} stream records after {attempts} attempts")
            return
        # The on-failure record Lambda sends for streams: a pointer to the batch, not the records.
        body = {
            "requestContext": {
                "requestId": str(uuid.uuid4()),
                "functionArn": self.runtime.functions[self.spec.function].spec.arn,
                "condition": "RetryAttemptsExhausted",
                "approximateInvokeCount": attempts,
            },
            "responseContext": {"statusCode": 200, "functionError": result.error_type or "Unhandled"},
            "version": "1.0",
            "timestamp": dt.datetime.now(dt.UTC).isoformat(),
            "DDBStreamBatchInfo": {
                "shardId": shard_id,
                "startSequenceNumber": records[0]["dynamodb"]["SequenceNumber"],
                "endSequenceNumber": records[-1]["dynamodb"]["SequenceNumber"],
                "batchSize": len(records),
                "streamArn": self.spec.source_arn,
            },
        }
        self.sqs.send_message(
            QueueUrl=_queue_url(self.endpoint, self.spec.on_failure_arn), MessageBody=json.dumps(body)
        )
        self.log(f"{self.spec.function}: {len(records)} stream records sent to the on-failure destination")


class Mappings:
    def __init__(self, specs: list[MappingSpec], runtime: Runtime, endpoint: str, log: Log) -> None:
        self.stop = threading.Event()
        self.items: list[SqsMapping | StreamMapping] = []
        for spec in specs:
            if not spec.enabled:
                continue
            if spec.kind == "sqs":
                self.items.append(SqsMapping(spec, runtime, endpoint, self.stop, log))
            else:
                self.items.append(StreamMapping(spec, runtime, endpoint, self.stop, log))

    def start(self) -> None:
        for item in self.items:
            item.start()

    def close(self) -> None:
        self.stop.set()
        for item in self.items:
            for thread in item.threads:
                thread.join(timeout=5)
