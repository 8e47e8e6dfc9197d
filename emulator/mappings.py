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
import hashlib
import json
import random
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from emulator.iam import access_key_for
from emulator.provision import MappingSpec
from emulator.runtime import InvokeResult, Runtime
from emulator.server import REGION, client

Log = Callable[[str], None]


class DuplicateDelivery:
    """Chaos switch: every batch for a matching function is invoked TWICE with the same records (the
    first invocation's outcome is discarded, as when Lambda's delete or checkpoint after a success is
    lost). Matching is by substring of the function's logical name; ``"*"`` matches every function.
    Consumers must make the second delivery a no-op: this is how the sandbox proves they do."""

    def __init__(self, patterns: tuple[str, ...] = (), *, rate: float = 0.0, seed: int | None = None) -> None:
        self.patterns = frozenset(patterns)
        # Chaos at volume: besides the named functions, this share of every function's batches.
        self.rate = rate
        self._draws = random.Random(seed)
        self._lock = threading.Lock()
        # Body substrings whose batches are ALWAYS delivered twice (chaos: every poison message).
        self._always: set[str] = set()
        # Late duplicates: this share of the SQS records invoked is kept, to be delivered again long
        # after (``take_late``), once the entity has moved on -- as SNS and SQS may, minutes later.
        self.late_rate = 0.0
        self._late: list[tuple[float, dict[str, Any]]] = []
        self._late_draws = random.Random(seed)

    def set_late_rate(self, rate: float, seed: int | None = None) -> None:
        with self._lock:
            self.late_rate = rate
            self._late_draws = random.Random(seed)

    def take_late(self, older_than: float) -> list[dict[str, Any]]:
        """The kept records invoked at least ``older_than`` seconds ago (removed from the keep)."""
        cutoff = time.monotonic() - older_than
        with self._lock:
            due = [record for at, record in self._late if at <= cutoff]
            self._late = [(at, record) for at, record in self._late if at > cutoff]
        return due

    def _keep_late(self, records: list[dict[str, Any]]) -> None:
        if self.late_rate <= 0.0:
            return
        with self._lock:
            for record in records:
                if record.get("eventSource") == "aws:sqs" and self._late_draws.random() < self.late_rate:
                    self._late.append((time.monotonic(), record))

    def always_for(self, substring: str) -> None:
        with self._lock:
            self._always.add(substring)

    def set(self, patterns: tuple[str, ...]) -> None:
        self.patterns = frozenset(patterns)

    def set_rate(self, rate: float, seed: int | None = None) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"duplicate-delivery rate {rate} is not a probability from 0 to 1")
        with self._lock:
            self.rate = rate
            self._draws = random.Random(seed)

    def applies(self, function: str, records: list[dict[str, Any]] | None = None) -> bool:
        patterns = self.patterns  # one read: set() may swap it from another thread
        if "*" in patterns or any(p in function for p in patterns):
            return True
        if self._always and records:
            with self._lock:
                always = tuple(self._always)
            if any(s in str(r.get("body", "")) for r in records for s in always):
                return True
        if self.rate <= 0.0:
            return False
        with self._lock:
            return self._draws.random() < self.rate

    def invoke(
        self, runtime: Runtime, function: str, records: list[dict[str, Any]], stats: MappingStats
    ) -> InvokeResult:
        """Invoke ``function`` with the batch -- twice when the switch applies; the last outcome counts."""
        self._keep_late(records)
        if self.applies(function, records):
            runtime.invoke(function, {"Records": records})
            stats.add(duplicated_records=len(records))
        return runtime.invoke(function, {"Records": records})


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
        self.duplicated_records = 0

    def add(self, **changes: int) -> None:
        with self.lock:
            for name, delta in changes.items():
                setattr(self, name, getattr(self, name) + delta)


class SqsMapping:
    def __init__(
        self,
        spec: MappingSpec,
        runtime: Runtime,
        endpoint: str,
        stop: threading.Event,
        log: Log,
        duplicates: DuplicateDelivery | None = None,
    ) -> None:
        self.spec = spec
        self.duplicates = duplicates or DuplicateDelivery()
        self.runtime = runtime
        self.stop = stop
        self.log = log
        # Lambda's poller reads, deletes and changes visibility with the function's execution role.
        self.sqs = client("sqs", endpoint, access_key_id=access_key_for(spec.function), glue="esm")
        self.queue_url = _queue_url(endpoint, spec.source_arn)
        self.stats = MappingStats()
        # Set: the mapping is disabled (UpdateEventSourceMapping Enabled=false): nothing is received,
        # and what a poll already had in hand goes back to the queue at once.
        self.paused = threading.Event()
        # MaximumConcurrency caps the concurrent invocations, which is what a poller count models
        # here. Lambda scales its pollers with the backlog; so does this: one poller long-polls an
        # idle queue, each receive that finds messages wakes one more (up to the cap), each empty
        # receive puts one back to sleep. Idle queues then cost one long poll each, not five -- on
        # two cores, dozens of idle long polls were a quarter of the emulator's CPU.
        self.pollers = int(spec.max_concurrency or 5)
        self._active = 1
        self._scale = threading.Condition()
        self.threads = [
            threading.Thread(target=self._poll, args=(i,), name=f"sqs-{spec.function[-20:]}-{i}", daemon=True)
            for i in range(self.pollers)
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def pending(self) -> int:
        """Messages in the poller's hands (in a batch being invoked); the rest are in the queue."""
        return self.stats.in_flight

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

    def _rescale(self, found_messages: bool) -> None:
        with self._scale:
            if found_messages and self._active < self.pollers:
                self._active += 1
                self._scale.notify()
            elif not found_messages and self._active > 1:
                self._active -= 1

    def _poll(self, index: int) -> None:
        while not self.stop.is_set():
            with self._scale:
                if index >= self._active:
                    self._scale.wait(timeout=1)
                    continue
            if self.paused.is_set():
                time.sleep(0.2)
                continue
            try:
                messages = self._gather()
            except Exception as exc:
                if not self.stop.is_set():
                    self.log(f"sqs poller {self.spec.function}: receive failed: {exc}")
                    time.sleep(1)
                continue
            if messages and self.paused.is_set():
                for message in messages:
                    self.sqs.change_message_visibility(
                        QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
                    )
                continue
            self._rescale(bool(messages))
            if not messages:
                continue
            self._process(messages)

    def _process(self, messages: list[dict[str, Any]]) -> None:
        records = [sqs_record(m, self.spec.source_arn) for m in messages]
        self.stats.add(batches=1, records=len(records), in_flight=len(records))
        try:
            result = self.duplicates.invoke(self.runtime, self.spec.function, records, self.stats)
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


class _Lane:
    """Records of one stream lane waiting to be processed, in order; the head is retried in place."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.cond = threading.Condition()
        self.first_at: float | None = None  # when the oldest waiting record arrived

    def put(self, record: dict[str, Any]) -> None:
        with self.cond:
            if not self.records:
                self.first_at = time.monotonic()
            self.records.append(record)
            self.cond.notify()

    def take(self, size: int, window: float, stop: threading.Event) -> list[dict[str, Any]]:
        """The next batch (not removed until ``done``): BatchSize records, or what arrived within the
        batching window after the first one."""
        with self.cond:
            while not stop.is_set():
                if self.records:
                    closes = (self.first_at or 0.0) + window
                    remaining = closes - time.monotonic()
                    if len(self.records) >= size or remaining <= 0:
                        return list(self.records[:size])
                    self.cond.wait(timeout=remaining)
                else:
                    self.cond.wait(timeout=0.5)
            return []

    def done(self, count: int) -> None:
        with self.cond:
            del self.records[:count]
            self.first_at = time.monotonic() if self.records else None

    def waiting(self) -> int:
        """Records read and not yet done: batching, being processed, or waiting out a retry's backoff."""
        with self.cond:
            return len(self.records)


class StreamMapping:
    """DynamoDB stream pollers (moto exposes a single shard per table).

    Per shard, one reader follows the shard (about four reads a second, as Lambda polls) and deals
    the records out to ``ParallelizationFactor`` lanes by the hash of their partition key, so records
    of one item stay in order while different items are processed concurrently; each lane batches
    (BatchSize, batching window), invokes, and on failure retries from its lowest failed
    SequenceNumber with backoff until ``MaximumRetryAttempts``, then sends the batch's description to
    the ``OnFailure`` destination and moves on -- as Lambda does per shard and, with a
    parallelization factor, per partition-key lane.
    """

    def __init__(
        self,
        spec: MappingSpec,
        runtime: Runtime,
        endpoint: str,
        stop: threading.Event,
        log: Log,
        duplicates: DuplicateDelivery | None = None,
    ) -> None:
        self.spec = spec
        self.duplicates = duplicates or DuplicateDelivery()
        self.runtime = runtime
        self.stop = stop
        self.log = log
        # The stream is read, and the on-failure destination written, with the function's role.
        self.streams = client(
            "dynamodbstreams", endpoint, access_key_id=access_key_for(spec.function), glue="esm"
        )
        self.sqs = client("sqs", endpoint, access_key_id=access_key_for(spec.function), glue="esm")
        self.endpoint = endpoint
        self.stats = MappingStats()
        self.retries = 0
        self.threads: list[threading.Thread] = []
        self.lanes = max(1, int(spec.parallelization_factor))
        self.hash_key = self._hash_key(endpoint)
        self._lanes: list[_Lane] = []
        # Until a read of every shard comes back empty, records may sit in the stream unread.
        self._unread: dict[str, bool] = {}

    def pending(self) -> int:
        """Records not yet done: unread in a shard (counted 1 until a read comes back empty), or read
        and waiting in a lane -- batching, being processed, or waiting out a failed batch's backoff,
        when no invocation is in flight. Idle means 0 here, not only no invocation in flight."""
        return sum(self._unread.values()) + sum(lane.waiting() for lane in self._lanes)

    def _hash_key(self, endpoint: str) -> str | None:
        table = self.spec.source_arn.split(":table/", 1)[-1].split("/stream/", 1)[0]
        try:
            schema = client("dynamodb", endpoint).describe_table(TableName=table)["Table"]["KeySchema"]
        except Exception:
            return None
        return next((k["AttributeName"] for k in schema if k["KeyType"] == "HASH"), None)

    def _lane_of(self, record: dict[str, Any]) -> int:
        if self.lanes == 1:
            return 0
        keys = record.get("dynamodb", {}).get("Keys", {})
        partition = keys.get(self.hash_key) if self.hash_key else keys
        digest = hashlib.sha256(json.dumps(partition, sort_keys=True).encode()).digest()
        return int.from_bytes(digest[:4], "big") % self.lanes

    def start(self) -> None:
        shards = self.streams.describe_stream(StreamArn=self.spec.source_arn)["StreamDescription"]["Shards"]
        for shard in shards:
            shard_id = shard["ShardId"]
            lanes = [_Lane() for _ in range(self.lanes)]
            self._lanes += lanes
            self._unread[shard_id] = True
            targets: list[tuple[Callable[..., None], tuple[Any, ...], str]] = [
                (self._read, (shard_id, lanes), f"stream-{shard_id[-8:]}")
            ]
            targets += [
                (self._work, (shard_id, lane), f"stream-{shard_id[-8:]}-{i}") for i, lane in enumerate(lanes)
            ]
            for target, args, name in targets:
                thread = threading.Thread(target=target, args=args, name=name, daemon=True)
                self.threads.append(thread)
                thread.start()

    def _read(self, shard_id: str, lanes: list[_Lane]) -> None:
        position = "LATEST" if self.spec.starting_position == "LATEST" else "TRIM_HORIZON"
        iterator = self.streams.get_shard_iterator(
            StreamArn=self.spec.source_arn, ShardId=shard_id, ShardIteratorType=position
        )["ShardIterator"]
        while not self.stop.is_set():
            try:
                response = self.streams.get_records(ShardIterator=iterator, Limit=1000)
            except Exception as exc:
                if not self.stop.is_set():
                    self.log(f"stream poller {self.spec.function}: {exc}")
                    time.sleep(1)
                continue
            iterator = response["NextShardIterator"]
            records = response.get("Records", [])
            for record in records:
                record = _jsonable(record)
                record["eventSourceARN"] = self.spec.source_arn
                lanes[self._lane_of(record)].put(record)
            self._unread[shard_id] = bool(records)
            if not records:
                # Lambda polls each shard about four times a second.
                self.stop.wait(0.25)

    def _work(self, shard_id: str, lane: _Lane) -> None:
        attempts = 0
        while not self.stop.is_set():
            batch = lane.take(self.spec.batch_size, self.spec.batching_window, self.stop)
            if not batch:
                continue
            self.stats.add(batches=1, records=len(batch), in_flight=len(batch))
            try:
                result = self.duplicates.invoke(self.runtime, self.spec.function, batch, self.stats)
            finally:
                self.stats.add(in_flight=-len(batch))
            sequence = [r["dynamodb"]["SequenceNumber"] for r in batch]
            failed = failed_item_ids(result, sequence, self.spec.report_batch_item_failures)
            if not failed:
                lane.done(len(batch))
                attempts = 0
                continue
            self.stats.add(failed_records=len(failed), failed_batches=1)
            # Checkpoint at the lowest failed sequence number: everything before it is done.
            first_failed = sequence.index(min(failed, key=int))
            attempts += 1
            self.retries += 1
            if attempts > self.spec.max_retry_attempts:
                self._on_failure(shard_id, batch[first_failed:], attempts, result)
                lane.done(len(batch))
                attempts = 0
                continue
            lane.done(first_failed)  # the failed record and everything after it are retried
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
    def __init__(
        self,
        specs: list[MappingSpec],
        runtime: Runtime,
        endpoint: str,
        log: Log,
        duplicates: DuplicateDelivery | None = None,
    ) -> None:
        self.stop = threading.Event()
        self.duplicates = duplicates or DuplicateDelivery()
        self.items: list[SqsMapping | StreamMapping] = []
        for spec in specs:
            if not spec.enabled:
                continue
            if spec.kind == "sqs":
                self.items.append(SqsMapping(spec, runtime, endpoint, self.stop, log, self.duplicates))
            else:
                self.items.append(StreamMapping(spec, runtime, endpoint, self.stop, log, self.duplicates))

    def start(self) -> None:
        for item in self.items:
            item.start()

    def close(self) -> None:
        self.stop.set()
        for item in self.items:
            for thread in item.threads:
                thread.join(timeout=5)
