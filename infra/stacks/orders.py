"""The `orders` stack: one order event, several independent consumers (the fan-out note).

POST /orders → ONE transaction {order CREATED, outbox OrderCreated} → stream → outbox publisher →
SNS order-events ─┬→ inventory queue      (OrderCreated, OrderCancelled: reserve/release stock once)
                  ├→ notification queue   (OrderCreated, OrderPaid, OrderRejected: webhook once)
                  └→ analytics queue      (every event, raw delivery: one S3 object per eventId)
payments' payment-events ─→ paid-orders queue (PaymentCompleted: order PAID once + OrderPaid)

Each consumer has its own queue, retries and backlog, so a slow or broken one never holds the others
back, and the order service never calls them synchronously.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.base import Platform, RelayStack
from infra.constructs.buckets import PrivateBucket
from infra.constructs.fanout_topic import FanoutTopic
from infra.constructs.http_api import HttpApi
from infra.constructs.outbox_publisher import OutboxPublisher
from infra.constructs.queue_consumer import QueueConsumer, RelayFunction
from infra.constructs.reliable_queue import ReliableQueue
from infra.constructs.tables import ReliableTable, idempotency_table

# The handlers' tests assert these equal functions/orders/subscriptions.py, so code and infra agree.
INVENTORY_EVENTS = ["OrderCreated", "OrderCancelled"]
NOTIFICATION_EVENTS = ["OrderCreated", "OrderPaid", "OrderRejected"]
PAID_ORDER_EVENTS = ["PaymentCompleted"]
ANALYTICS_PREFIX = "events/"


def _event_type(names: list[str]) -> dict[str, sns.SubscriptionFilter]:
    return {"eventType": sns.SubscriptionFilter.string_filter(allowlist=names)}


class OrdersStack(RelayStack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        platform: Platform,
        payment_events: FanoutTopic,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, config=config, service="orders", platform=platform, **kwargs)
        settings = config.orders
        orders = ReliableTable(self, "Orders", name="orders", stream=True).table
        inventory = ReliableTable(self, "Inventory", name="inventory").table
        idempotency = idempotency_table(self).table
        archive = PrivateBucket(
            self, "Analytics", expiration_days=settings.analytics_retention_days, purpose="analytics"
        )
        analytics_bucket = archive.bucket

        topic = FanoutTopic(self, "OrderEvents", name="order-events")
        inventory_q = ReliableQueue(self, "InventoryQueue", name="inventory")
        notify_q = ReliableQueue(self, "NotificationQueue", name="order-notifications")
        analytics_q = ReliableQueue(self, "AnalyticsQueue", name="analytics")
        paid_q = ReliableQueue(self, "PaidOrdersQueue", name="paid-orders")
        topic.subscribe(inventory_q, filter_policy=_event_type(INVENTORY_EVENTS))
        topic.subscribe(notify_q, filter_policy=_event_type(NOTIFICATION_EVENTS))
        # Raw delivery: analytics stores the envelope as it is, one object per eventId; no SNS wrapper
        # to strip, and the body is what a daily export reads.
        topic.subscribe(analytics_q, raw_delivery=True)
        payment_events.subscribe(paid_q, filter_policy=_event_type(PAID_ORDER_EVENTS))
        self.topic = topic

        # Each function is told only of the tables it uses, and granted exactly those
        # (tests/infra/test_grants.py holds the two together).
        orders_env = {"ORDERS_TABLE": orders.table_name}
        inventory_env = {"INVENTORY_TABLE": inventory.table_name}
        idempotency_env = {"IDEMPOTENCY_TABLE": idempotency.table_name}
        api_fn = RelayFunction(
            self,
            "Api",
            handler="orders.api.handler",
            environment={**orders_env, **idempotency_env},
            description="POST /orders, GET /orders/{orderId}, POST /orders/{orderId}/cancel",
        )
        orders.grant_read_write_data(api_fn.function)
        idempotency.grant_read_write_data(api_fn.function)
        self.http = HttpApi(
            self,
            "Http",
            name="orders-api",
            handler=api_fn,
            routes=[
                (apigw.HttpMethod.POST, "/orders"),
                (apigw.HttpMethod.GET, "/orders/{orderId}"),
                (apigw.HttpMethod.POST, "/orders/{orderId}/cancel"),
            ],
        )

        OutboxPublisher(
            self,
            "OutboxPublisher",
            table=orders,
            topic=topic,
            handler="orders.outbox_publisher.handler",
            environment=orders_env,
        )

        webhook = {
            "NOTIFY_WEBHOOK_URL": settings.notify_webhook_url,
            "HTTP_TIMEOUT_SECONDS": str(settings.http_timeout_seconds),
        }
        inventory_fn = QueueConsumer(
            self,
            "InventoryWorker",
            queue=inventory_q,
            handler="orders.inventory.handler",
            environment={**orders_env, **inventory_env, **idempotency_env},
            description="OrderCreated / OrderCancelled → reserve / release stock exactly once",
        )
        notifier = QueueConsumer(
            self,
            "Notifier",
            queue=notify_q,
            handler="orders.notifier.handler",
            environment={**idempotency_env, **webhook},
            description="customer notifications, once per event",
        )
        analytics = QueueConsumer(
            self,
            "AnalyticsWriter",
            queue=analytics_q,
            handler="orders.analytics.handler",
            environment={"ANALYTICS_BUCKET": analytics_bucket.bucket_name},
            description="every order event → one S3 object per eventId",
        )
        paid = QueueConsumer(
            self,
            "PaidOrders",
            queue=paid_q,
            handler="orders.paid_orders.handler",
            environment={**orders_env, **idempotency_env},
            description="PaymentCompleted → order PAID once + OrderPaid",
        )
        # Analytics needs no marker: its S3 object per eventId, written only if absent, is the record.
        for consumer in (inventory_fn, notifier, paid):
            idempotency.grant_read_write_data(consumer.function)
        for consumer in (inventory_fn, paid):
            orders.grant_read_write_data(consumer.function)
        inventory.grant_read_write_data(inventory_fn.function)
        archive.grant_prefix(
            analytics.role,
            ANALYTICS_PREFIX,
            read=True,
            why="One object per eventId under events/dt=.../: keys are only known at run time, so the grant "
            "is scoped to the events/ prefix of this service's own bucket.",
        )

        for metric, label, description in (
            (
                "OrphanPayment",
                "OrphanPayments",
                "orders: a payment completed for an unknown or closed order.",
            ),
            (
                "PayloadConflict",
                "PayloadConflicts",
                "orders: an eventId arrived again with a different payload.",
            ),
        ):
            self.alarms.watch_kernel_metric(metric, label=label, description=description)
        self.orders_table = orders
        self.inventory_table = inventory
