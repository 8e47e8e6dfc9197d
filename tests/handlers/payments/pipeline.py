"""An in-test stand-in for the glue AWS provides around the payments handlers, on moto.

``create_infrastructure()`` provisions the payments stack from its template
(``tests.handlers.stack_world``): tables with the stream, bucket, topic, reliable queues with DLQs and
redrive, filtered SNS subscriptions, enveloped delivery -- as the stack defines them. ``Pump`` plays
the event source mappings: it reads the operations-table stream into the outbox publisher, receives
SQS messages into the right handler (optionally delivering every batch twice) and deletes what the
partial batch response reports handled -- the same protocol Lambda follows.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from emulator.moto_patches import fast_atomic_dynamodb
from relay.envelope import Envelope
from tests.builders import (
    FakeContext,
    environment,
)
from tests.handlers.stack_world import StackWorld, aws, plan, provision
from tests.handlers.streams import StreamReader, produced_events

if TYPE_CHECKING:
    from payments.operations import Operation

REGION = "us-east-1"
# Tests spell these tables' names out; every other name is the stack's.
NAMES = {"OPERATIONS_TABLE": "payments-operations", "IDEMPOTENCY_TABLE": "payments-idempotency"}
_PLAN = plan("payments", names=tuple(NAMES.items()))
OPERATIONS_TABLE = _PLAN.env()["OPERATIONS_TABLE"]
IDEMPOTENCY_TABLE = _PLAN.env()["IDEMPOTENCY_TABLE"]
BUCKET = _PLAN.env()["PAYMENTS_BUCKET"]


@dataclass
class Queue:
    name: str
    url: str
    arn: str
    dlq_url: str
    dlq_arn: str


@dataclass
class Infrastructure:
    ddb: Any
    s3: Any
    sqs: Any
    sns: Any
    streams: Any
    topic_arn: str
    stream_arn: str
    stack: StackWorld
    queues: dict[str, Queue] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        """The functions' environment from the template, with the test's overrides."""
        return self.stack.env()

    def consumer_env(self, queue: str) -> dict[str, str]:
        """What the function consuming ``queue`` sets on top of ``env()`` (RELAY_QUEUE_URL, ...)."""
        return self.stack.function_env(self.stack.consumers()[queue].function)

    # inspection ------------------------------------------------------------------------------

    def receive_all(self, url: str, *, wait: int = 0, visibility: int = 30) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        while True:
            batch = self.sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=10,
                WaitTimeSeconds=wait,
                VisibilityTimeout=visibility,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            if not batch:
                return messages
            messages.extend(batch)

    def operation_item(self, operation_id: str) -> dict[str, Any] | None:
        from relay.ddb import deserialize_item

        item = self.ddb.get_item(
            TableName=OPERATIONS_TABLE,
            Key={"pk": {"S": f"OPERATION#{operation_id}"}, "sk": {"S": "OPERATION"}},
        ).get("Item")
        return deserialize_item(item) if item else None

    def operation(self, operation_id: str) -> Operation | None:
        """The operation as the services read it (``payments.store.operation_from_item``): its steps,
        request and result whatever their stored shape."""
        from payments.store import operation_from_item

        item = self.operation_item(operation_id)
        return operation_from_item(item) if item else None

    def item_events(self, operation_id: str) -> list[Envelope]:
        """The events the operation item holds now (``ev``: the last write's, which the stream
        publisher publishes)."""
        from relay.entity_events import events_in

        return events_in(self.operation_item(operation_id))

    def produced_events(self, operation_id: str) -> list[Envelope]:
        """Every event the operation's writes produced, in order -- what the stream publisher
        publishes, found the way it finds them: the events a write added to the item (in the stream
        record's NEW image and not in its OLD one), and the outbox rows inserted (the layout before).
        Read from the table's whole stream, so a step that produced an event twice shows it twice."""
        return produced_events(self.streams, self.stream_arn, f"OPERATION#{operation_id}")

    def outbox_rows(self, operation_id: str) -> list[dict[str, Any]]:
        """Outbox rows of the layout before one write per step (payments writes none any more)."""
        from relay.ddb import deserialize_item

        items = self.ddb.query(
            TableName=OPERATIONS_TABLE,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :outbox)",
            ExpressionAttributeValues={
                ":pk": {"S": f"OPERATION#{operation_id}"},
                ":outbox": {"S": "OUTBOX#"},
            },
        )["Items"]
        return [deserialize_item(i) for i in items]

    def s3_keys(self, prefix: str = "payments/") -> list[str]:
        response = self.s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
        return sorted(o["Key"] for o in response.get("Contents", []))


def create_infrastructure(overrides: dict[str, str] | None = None) -> Infrastructure:
    """Call inside ``mock_aws``."""
    stack = provision("payments", overrides, names=NAMES)
    infra = Infrastructure(
        ddb=aws("dynamodb"),
        s3=aws("s3"),
        sqs=aws("sqs"),
        sns=aws("sns"),
        streams=aws("dynamodbstreams"),
        topic_arn=stack.env()["EVENTS_TOPIC_ARN"],
        stream_arn=stack.stream_arn(OPERATIONS_TABLE),
        stack=stack,
    )
    for name, c in stack.consumers().items():
        infra.queues[name] = Queue(name, c.url, c.arn, c.dlq_url, c.dlq_arn)
    return infra


def lambda_sqs_event(messages: list[dict[str, Any]], queue: Queue) -> dict[str, Any]:
    """SQS ReceiveMessage output -> the event Lambda's event source mapping would pass."""
    records = []
    for message in messages:
        attributes = {
            name: {"stringValue": value.get("StringValue"), "dataType": value["DataType"]}
            for name, value in (message.get("MessageAttributes") or {}).items()
        }
        records.append(
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": message.get("Attributes", {}),
                "messageAttributes": attributes,
                "md5OfBody": message.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue.arn,
                "awsRegion": REGION,
            }
        )
    return {"Records": records}


Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


class Pump:
    """Moves work through the pipeline the way the managed glue would."""

    def __init__(self, infra: Infrastructure, *, deliveries: int = 2, publish_deliveries: int = 1) -> None:
        from payments.handlers import (
            invoice_worker,
            notice_sender,
            outbox_publisher,
            payment_worker,
            post_processor,
        )

        self.infra = infra
        self.deliveries = deliveries
        self.publish_deliveries = publish_deliveries
        self.handlers: dict[str, Handler] = {
            "payment-requests": payment_worker.handler,
            "post-processing": post_processor.handler,
            "invoice-requests": invoice_worker.handler,
            "notices": notice_sender.handler,
        }
        self.publisher: Handler = outbox_publisher.handler
        # On top of the fixture's env(): what each function sets differently from the others (and
        # nothing a test has set for itself, such as PAYMENT_CHECK_BASE_DELAY_SECONDS).
        self.publisher_env = infra.stack.function_env(
            infra.stack.function("payments.handlers.outbox_publisher.handler")
        )
        self.context = FakeContext()
        self._pending_stream: list[dict[str, Any]] = []
        self._stream = StreamReader(self.infra.streams, self.infra.stream_arn)
        self.invocations: dict[str, int] = {}

    # stream -> outbox publisher ----------------------------------------------------------------

    def _read_stream(self) -> list[dict[str, Any]]:
        return self._stream.read()

    def publish_outbox(self) -> int:
        """Feed new stream records to the outbox publisher in batches of 100; failed records (and
        everything after them, as a stream shard would) are offered again on the next call."""
        records = self._pending_stream + self._read_stream()
        self._pending_stream = []
        published = 0
        for start in range(0, len(records), 100):
            batch = records[start : start + 100]
            with environment(self.publisher_env):
                # A stream batch can be handed to the publisher again (retry after a timeout):
                # every row is then published twice and the consumers must not care.
                for _ in range(self.publish_deliveries):
                    response = self.publisher({"Records": batch}, self.context)
                    self.invocations["outbox-publisher"] = self.invocations.get("outbox-publisher", 0) + 1
            failures = [f["itemIdentifier"] for f in response.get("batchItemFailures", [])]
            if failures:
                first = next(i for i, r in enumerate(batch) if r["dynamodb"]["SequenceNumber"] == failures[0])
                self._pending_stream = batch[first:] + records[start + 100 :]
                return published + first
            published += len(batch)
        return published

    # queues -> consumers -----------------------------------------------------------------------

    def drain_queue(self, name: str) -> int:
        """Receive every visible message once (so each receive count rises by one per round), hand
        them to the handler in batches of 10, each batch ``deliveries`` times, and delete what the
        last delivery's partial batch response reports handled. Returns messages received."""
        queue = self.infra.queues[name]
        messages = self.infra.receive_all(queue.url)
        for start in range(0, len(messages), 10):
            batch = messages[start : start + 10]
            event = lambda_sqs_event(batch, queue)
            failed: set[str] = set()
            with environment(self.infra.consumer_env(name)):
                for _ in range(self.deliveries):
                    response = self.handlers[name](event, self.context)
                    self.invocations[name] = self.invocations.get(name, 0) + 1
                    failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
            entries = [
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                for i, m in enumerate(batch)
                if m["MessageId"] not in failed
            ]
            if entries:
                self.infra.sqs.delete_message_batch(QueueUrl=queue.url, Entries=entries)
        return len(messages)

    def step(self) -> int:
        """One round over the stream and every queue; returns how much work was seen."""
        work = self.publish_outbox()
        for name in self.handlers:
            work += self.drain_queue(name)
        return work

    def run(self, *, max_rounds: int = 1000, until: Callable[[], bool] | None = None) -> int:
        """Pump until nothing moves (or ``until()`` holds); returns the rounds taken."""
        for rounds in range(1, max_rounds + 1):
            work = self.step()
            if until is not None and until():
                return rounds
            if until is None and work == 0:
                return rounds
        raise AssertionError(f"the pipeline did not settle within {max_rounds} rounds")


def moto_transactions_without_table_snapshots() -> AbstractContextManager[None]:
    """moto's TransactWriteItems deep-copies every table it touches (with its stream history), which
    makes a long run quadratic; the sandbox's emulator uses the same replacement, as all-or-nothing as
    moto's own (tests/sandbox/test_moto_patches.py compares them). Only the pipeline scenario uses it;
    every other test runs against moto's own implementation."""
    return fast_atomic_dynamodb()
