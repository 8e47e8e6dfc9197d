"""The orders stack on moto, provisioned from its template -- and the glue AWS provides around it,
played in-test.

``create_world()`` provisions the orders stack (and the payments stack it imports ``payment-events``
from) with ``tests.handlers.stack_world``: the tables (orders with its stream), the analytics bucket,
the ``order-events`` topic with the inventory and notifications queues (and the analytics stream), and the
paid-orders queue on ``payment-events`` -- every queue with its DLQ and redrive policy, every
subscription with the filter policy and delivery mode the stack gives it. ``Pump`` plays the event
source mappings like the payments pipeline's: the stream into the outbox publisher, each queue into
its handler (optionally every batch twice), deleting what the partial batch response reports handled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from orders.archive import ArchiveRead, read_archive
from orders.subscriptions import ORDERS_SOURCE

from relay.ddb import deserialize_item
from relay.envelope import ClaimCheckRef, Envelope, new_envelope
from relay.outbox import sns_publisher
from tests.builders import FakeContext, environment, eventbridge_wrapped, failed_ids, retry_copy, sns_wrapped
from tests.handlers.stack_world import StackWorld, aws, plan, provision
from tests.handlers.streams import StreamReader, produced_events

REGION = "us-east-1"
# A test spells this table's name out (test_orders_paid_orders); every other name is the stack's.
NAMES = {"ORDERS_TABLE": "orders-orders"}
_PLAN = plan("orders", names=tuple(NAMES.items()))
ORDERS_TABLE = _PLAN.env()["ORDERS_TABLE"]
INVENTORY_TABLE = _PLAN.env()["INVENTORY_TABLE"]
IDEMPOTENCY_TABLE = _PLAN.env()["IDEMPOTENCY_TABLE"]
BUCKET = _PLAN.output("AnalyticsBucketName")

# The queues, by the name the stack gives them (without its prefix), found by their consumers.
INVENTORY = _PLAN.queue_for("orders.handlers.inventory.handler")
NOTIFICATIONS = _PLAN.queue_for("orders.handlers.notifier.handler")
PAID_ORDERS = _PLAN.queue_for("orders.handlers.paid_orders.handler")
FAILED_PAYMENTS = _PLAN.queue_for("orders.handlers.failed_payments.handler")
# Fed by the app bus's shipping rule (EventBridge → SQS), not by an SNS subscription.
SHIPPING = _PLAN.queue_for("orders.handlers.shipping.handler")


@dataclass(frozen=True)
class Subscription:
    topic: str
    filter_policy: Mapping[str, list[str]] | None
    raw: bool


def _subscription(queue: str) -> Subscription:
    provisioned = _PLAN.subscription(_PLAN.consumers()[queue].arn)
    return Subscription(_PLAN.topic_name(provisioned.topic_arn), provisioned.filter_policy, provisioned.raw)


# How each queue is subscribed, as provisioned from the template.
SUBSCRIPTIONS = {
    queue: _subscription(queue) for queue in (INVENTORY, NOTIFICATIONS, PAID_ORDERS, FAILED_PAYMENTS)
}
ORDER_TOPIC = _PLAN.topic_name(_PLAN.env()["EVENTS_TOPIC_ARN"])
PAYMENT_TOPIC = SUBSCRIPTIONS[PAID_ORDERS].topic


@dataclass
class Queue:
    name: str
    url: str
    arn: str
    dlq_url: str


@dataclass
class OrdersWorld:
    ddb: Any
    s3: Any
    sqs: Any
    sns: Any
    streams: Any
    topics: dict[str, str]
    stream_arn: str
    stack: StackWorld
    queues: dict[str, Queue] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        """The functions' environment from the template, with the test's overrides."""
        return self.stack.env()

    def consumer_env(self, queue: str) -> dict[str, str]:
        """What the function consuming ``queue`` sets on top of ``env()`` (RELAY_QUEUE_URL, ...)."""
        return self.stack.function_env(self.stack.consumers()[queue].function)

    # state ---------------------------------------------------------------------------------------

    def _get(self, table: str, pk: str, sk: str) -> dict[str, Any] | None:
        item = self.ddb.get_item(TableName=table, Key={"pk": {"S": pk}, "sk": {"S": sk}}).get("Item")
        return deserialize_item(item) if item else None

    def order(self, order_id: str) -> dict[str, Any] | None:
        return self._get(ORDERS_TABLE, f"ORDER#{order_id}", "ORDER")

    def history(self, order_id: str) -> list[tuple[str, str]]:
        """The order's history as read back (status, ISO time), whatever the layout that wrote it."""
        from orders.store import history_entry_from_item

        item = self.order(order_id) or {}
        return [(h.status, h.at) for h in map(history_entry_from_item, item.get("history") or [])]

    def status(self, order_id: str) -> str | None:
        item = self.order(order_id)
        return str(item["status"]) if item else None

    def _partition(self, table: str, pk: str, prefix: str) -> list[dict[str, Any]]:
        items = self.ddb.query(
            TableName=table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": {"S": pk}, ":prefix": {"S": prefix}},
        )["Items"]
        return [deserialize_item(i) for i in items]

    def outbox(self, order_id: str, event_type: str | None = None) -> list[Envelope]:
        """Every event the order's writes produced (``produced_events``: its item's ``ev``, and outbox
        rows of the layout before), in order, duplicates kept."""
        found = produced_events(self.streams, self.stream_arn, f"ORDER#{order_id}")
        return [e for e in found if event_type is None or e.event_type == event_type]

    def orphan_payments(self, order_id: str) -> list[dict[str, Any]]:
        return self._partition(ORDERS_TABLE, f"ORDER#{order_id}", "PAYMENT#")

    def stock(self, sku: str) -> tuple[int, int] | None:
        item = self._get(INVENTORY_TABLE, f"SKU#{sku}", "STOCK")
        return (int(item["available"]), int(item.get("reserved", 0))) if item else None

    def reservation(self, order_id: str) -> dict[str, Any] | None:
        """What the order holds of the stock, ``{"status", "items"}``: its own ``stock`` (and lines), or
        the reservation item of the layout before; None when it holds nothing."""
        order = self.order(order_id)
        if order is not None and order.get("stock"):
            return {"status": order["stock"], "items": order["items"]}
        return self.reservation_item(order_id)

    def reservation_item(self, order_id: str) -> dict[str, Any] | None:
        """The reservation item of the layout before (no longer written)."""
        return self._get(INVENTORY_TABLE, f"ORDER#{order_id}", "RESERVATION")

    def seed(self, levels: Mapping[str, int]) -> None:
        for sku, available in levels.items():
            self.ddb.put_item(
                TableName=INVENTORY_TABLE,
                Item={
                    "pk": {"S": f"SKU#{sku}"},
                    "sk": {"S": "STOCK"},
                    "available": {"N": str(available)},
                    "reserved": {"N": "0"},
                },
            )

    def archived(self) -> dict[str, bytes]:
        """Every object under the archive's events/ prefix, by key."""
        listing = self.s3.list_objects_v2(Bucket=BUCKET, Prefix="events/").get("Contents", [])
        return {o["Key"]: self.s3.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read() for o in listing}

    def archive(self) -> ArchiveRead:
        """The archive as its readers see it: one copy per eventId, whatever the layout."""
        return read_archive(self.s3, BUCKET)

    # queues --------------------------------------------------------------------------------------

    def receive_all(self, url: str) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        while True:
            batch = self.sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=30,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            if not batch:
                return messages
            messages.extend(batch)

    def retry_copy(self, queue: str, *, attempt: int = 1, body: str | None = None) -> dict[str, Any]:
        """The one delayed copy the consumer re-sent to ``queue`` to retry a transient failure (waiting
        out its DelaySeconds), asserted to be retry ``attempt`` (and a copy of ``body`` when given)."""
        return retry_copy(self.sqs, self.queues[queue].url, attempt=attempt, body=body)

    def parked(self, queue: str) -> list[dict[str, Any]]:
        return self.receive_all(self.queues[queue].dlq_url)

    def parked_reasons(self, queue: str) -> list[str]:
        return [m["MessageAttributes"]["relay.errorClass"]["StringValue"] for m in self.parked(queue)]

    def lambda_event(self, queue: str, messages: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """What the queue holds (or ``messages``), shaped as the event source mapping would."""
        q = self.queues[queue]
        received = self.receive_all(q.url) if messages is None else messages
        records = []
        for message in received:
            records.append(
                {
                    "messageId": message["MessageId"],
                    "receiptHandle": message["ReceiptHandle"],
                    "body": message["Body"],
                    "attributes": message.get("Attributes", {}),
                    "messageAttributes": {
                        name: {"stringValue": value.get("StringValue"), "dataType": value["DataType"]}
                        for name, value in (message.get("MessageAttributes") or {}).items()
                    },
                    "md5OfBody": message.get("MD5OfBody", ""),
                    "eventSource": "aws:sqs",
                    "eventSourceARN": q.arn,
                    "awsRegion": REGION,
                }
            )
        return {"Records": records}

    def send(self, queue: str, *envelopes: Envelope | str) -> dict[str, Any]:
        """Put the envelopes on the real (moto) queue as its subscription delivers them (SNS
        notification, or the raw envelope for a raw subscription) and receive them back as a Lambda
        SQS event with genuine receipt handles."""
        q = self.queues[queue]
        for env in envelopes:
            if isinstance(env, str):
                body = env
            elif queue == SHIPPING:
                body = eventbridge_wrapped(env, detail_type=env.event_type, source=ORDERS_SOURCE)
            elif SUBSCRIPTIONS[queue].raw:
                body = env.to_json()
            else:
                body = sns_wrapped(env, topic=SUBSCRIPTIONS[queue].topic)
            self.sqs.send_message(QueueUrl=q.url, MessageBody=body)
        event = self.lambda_event(queue)
        assert len(event["Records"]) == len(envelopes), "not every message came back"
        return event

    def publish(self, topic: str, env: Envelope) -> None:
        """Publish as the topic's outbox publisher does (eventType and correlationId message attributes,
        and on payment-events payments' own: ``payments.subscriptions.message_attributes``)."""
        from payments.subscriptions import message_attributes

        attributes = message_attributes if topic == PAYMENT_TOPIC else None
        sns_publisher(self.topics[topic], self.sns, attributes)(env, {})


def create_world(overrides: dict[str, str] | None = None) -> OrdersWorld:
    """Call inside ``mock_aws``."""
    stack = provision("orders", overrides, names=NAMES)
    topics = {
        stack.topic_name(arn): arn
        for name, arn in stack.topology.topics.items()
        if stack.topic_name(arn) in (ORDER_TOPIC, PAYMENT_TOPIC)
    }
    world = OrdersWorld(
        ddb=aws("dynamodb"),
        s3=aws("s3"),
        sqs=aws("sqs"),
        sns=aws("sns"),
        streams=aws("dynamodbstreams"),
        topics=topics,
        stream_arn=stack.stream_arn(ORDERS_TABLE),
        stack=stack,
    )
    for name, consumer in stack.consumers().items():
        world.queues[name] = Queue(name, consumer.url, consumer.arn, consumer.dlq_url)
    return world


def payment_completed(
    order_id: str | None, operation_id: str, *, payment_id: str = "pay-1", **ids: str
) -> Envelope:
    """A PaymentCompleted as payments publishes it (see payments.payment_step): the result travels by claim
    check, ``ids`` carry operationId, paymentId and -- when the payment had one -- orderId."""
    all_ids = {"operationId": operation_id, "paymentId": payment_id, **ids}
    if order_id is not None:
        all_ids["orderId"] = order_id
    return new_envelope(
        "PaymentCompleted",
        identity=[operation_id, "payment-completed"],
        ids=all_ids,
        claim_check=ClaimCheckRef(
            bucket="relay-payments", key=f"payments/{operation_id}/result.json", sha256="0" * 64, size=10
        ),
        correlation_id=f"corr-{operation_id}",
    )


def payment_failed(order_id: str | None, operation_id: str, *, code: str = "PaymentRejected") -> Envelope:
    """A PaymentFailed as payments publishes it (``payments.step_rules.fail``): ids with the order's id,
    payload ``{code, reason}``."""
    ids = {"operationId": operation_id, "paymentId": "pay-1"}
    if order_id is not None:
        ids["orderId"] = order_id
    return new_envelope(
        "PaymentFailed",
        identity=[operation_id, "payment-failed"],
        ids=ids,
        payload={"code": code, "reason": "insufficient funds"},
        correlation_id=f"corr-{operation_id}",
    )


def operation_cancelled(
    order_id: str | None, operation_id: str, *, reason: str = "order changed"
) -> Envelope:
    """An OperationCancelled as payments publishes it (``payments.cancellation``): the operation's ids,
    payload ``{reason}``."""
    ids = {"operationId": operation_id, "paymentId": "pay-1"}
    if order_id is not None:
        ids["orderId"] = order_id
    return new_envelope(
        "OperationCancelled",
        identity=[operation_id, "cancelled"],
        ids=ids,
        payload={"reason": reason},
        correlation_id=f"corr-{operation_id}",
    )


Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def handlers() -> dict[str, Handler]:
    from orders.handlers import failed_payments, inventory, notifier, paid_orders, shipping

    return {
        INVENTORY: inventory.handler,
        NOTIFICATIONS: notifier.handler,
        PAID_ORDERS: paid_orders.handler,
        FAILED_PAYMENTS: failed_payments.handler,
        SHIPPING: shipping.handler,
    }


def deliver(world: OrdersWorld, queue: str, *envelopes: Envelope | str, times: int = 1) -> dict[str, Any]:
    """Deliver the envelopes to ``queue``'s handler as one batch, ``times`` times (the same batch again,
    as after a lost acknowledgement); returns the last partial batch response."""
    event = world.send(queue, *envelopes)
    handler = handlers()[queue]
    response: dict[str, Any] = {}
    with environment(world.consumer_env(queue)):
        for _ in range(times):
            response = handler(event, FakeContext())
    return response


def redeliver(world: OrdersWorld, queue: str, messages: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Receive what is (again) visible on ``queue`` -- or take ``messages`` already received from it,
    e.g. the delayed copy a transient failure was re-sent as -- and hand it to the handler; returns
    the partial batch response."""
    event = world.lambda_event(queue, messages)
    assert event["Records"], f"nothing visible on {queue}"
    with environment(world.consumer_env(queue)):
        return handlers()[queue](event, FakeContext())


class Pump:
    """Moves work through the fan-out the way the managed glue would."""

    def __init__(self, world: OrdersWorld, *, deliveries: int = 2, publish_deliveries: int = 1) -> None:
        from orders.handlers import outbox_publisher

        self.world = world
        self.deliveries = deliveries
        self.publish_deliveries = publish_deliveries
        self.handlers = handlers()
        self.publisher: Handler = outbox_publisher.handler
        self.context = FakeContext()
        self._stream = StreamReader(self.world.streams, self.world.stream_arn)

    def _read_stream(self) -> list[dict[str, Any]]:
        return self._stream.read()

    def publish_outbox(self) -> int:
        records = self._read_stream()
        for start in range(0, len(records), 100):
            batch = records[start : start + 100]
            for _ in range(self.publish_deliveries):
                response = self.publisher({"Records": batch}, self.context)
                assert failed_ids(response) == [], response
        return len(records)

    def drain_queue(self, name: str) -> int:
        queue = self.world.queues[name]
        messages = self.world.receive_all(queue.url)
        for start in range(0, len(messages), 10):
            batch = messages[start : start + 10]
            event = self.world.lambda_event(name, batch)
            failed: set[str] = set()
            with environment(self.world.consumer_env(name)):
                for _ in range(self.deliveries):
                    response = self.handlers[name](event, self.context)
                    failed = set(failed_ids(response))
            entries = [
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                for i, m in enumerate(batch)
                if m["MessageId"] not in failed
            ]
            if entries:
                self.world.sqs.delete_message_batch(QueueUrl=queue.url, Entries=entries)
        return len(messages)

    def step(self) -> int:
        work = self.publish_outbox()
        for name in self.handlers:
            work += self.drain_queue(name)
        return work

    def run(self, *, max_rounds: int = 50) -> int:
        for rounds in range(1, max_rounds + 1):
            if self.step() == 0:
                return rounds
        raise AssertionError(f"the fan-out did not settle within {max_rounds} rounds")
