"""The `orders` stack: one order event, several independent consumers (the fan-out note).

POST /orders → ONE transaction {order CREATED, outbox OrderCreated} → stream → outbox publisher →
SNS order-events ─┬→ inventory queue      (OrderCreated, OrderCancelled: reserve/release stock once)
                  ├→ notification queue   (OrderCreated, OrderPaid, OrderRejected: webhook once)
                  └→ analytics stream     (every event, raw delivery: Amazon Data Firehose → JSON Lines
                                           in the analytics bucket, deduplicated by eventId when read)
payments' payment-events ─┬→ paid-orders queue     (PaymentCompleted: order PAID once + OrderPaid)
                          └→ failed-payments queue (PaymentFailed: order CANCELLED once + OrderCancelled,
                                                    which releases its stock)

The integration events (OrderPaid, OrderCancelled, OrderRejected) also go to the app's EventBridge
bus, from the same outbox publisher; rules there route them to the services that are not the order
service's own consumers (the loyalty stack's points rule) and to shipping:
app bus ── shipping rule (OrderPaid) → shipping queue → shipping worker → shipping API (key
           {orderId}:shipment), the shipment recorded on the order once

Each consumer has its own queue, retries and backlog, so a slow or broken one never holds the others
back, and the order service never calls them synchronously.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput
from aws_cdk import aws_apigatewayv2 as apigw
from constructs import Construct
from orders import settings as env

# The fan-out contract, written once in functions/orders/ (standard library only): the handlers and
# their moto tests deliver with the very same filters (`infra.stacks` puts functions/ on the path).
from orders.subscriptions import (
    ANALYTICS_RAW_DELIVERY,
    FAILED_PAYMENTS_FILTER,
    INVENTORY_FILTER,
    NOTIFICATIONS_FILTER,
    PAID_ORDERS_FILTER,
    SHIPPING_RULE,
)

from infra.config import StageConfig
from infra.constructs.archive_stream import ArchiveStream
from infra.constructs.buckets import PrivateBucket
from infra.constructs.bus_rule import BusRule
from infra.constructs.fanout_topic import FanoutTopic, allowlist_filter
from infra.constructs.function import RelayFunction, log_retention
from infra.constructs.monitoring import KernelMetric, ServiceMonitoring
from infra.constructs.outbox_publisher import OutboxPublisher
from infra.constructs.outputs import api_url_output, work_queues_output
from infra.constructs.queue_consumer import QueueConsumer
from infra.constructs.reliable_queue import ReliableQueue
from infra.constructs.tables import ReliableTable, idempotency_table
from infra.stacks.base import Platform, RelayStack

ANALYTICS_PREFIX = "events/"


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
        naming, keep, functions, queues = self.naming, self.removal_policy, self.functions, config.queues
        protect = config.deletion_protection

        def table(construct_id: str, name: str, *, stream: bool = False) -> ReliableTable:
            return ReliableTable(
                self,
                construct_id,
                name=name,
                naming=naming,
                removal_policy=keep,
                deletion_protection=protect,
                stream=stream,
            )

        def queue(construct_id: str, name: str) -> ReliableQueue:
            return ReliableQueue(
                self, construct_id, name=name, naming=naming, settings=queues, removal_policy=keep
            )

        orders = table("Orders", "orders", stream=True).table
        inventory = table("Inventory", "inventory").table
        idempotency = idempotency_table(
            self, naming=naming, removal_policy=keep, deletion_protection=protect
        ).table
        archive = PrivateBucket(
            self,
            "Analytics",
            expiration_days=settings.analytics_retention_days,
            purpose="analytics",
            queues=queues,
            removal_policy=keep,
        )
        analytics_bucket = archive.bucket

        topic = FanoutTopic(
            self, "OrderEvents", name="order-events", naming=naming, settings=queues, removal_policy=keep
        )
        inventory_q = queue("InventoryQueue", "inventory")
        notify_q = queue("NotificationQueue", "order-notifications")
        paid_q = queue("PaidOrdersQueue", "paid-orders")
        failed_q = queue("FailedPaymentsQueue", "failed-payments")
        shipping_q = queue("ShippingQueue", "shipping")
        topic.subscribe(inventory_q, filter_policy=allowlist_filter(INVENTORY_FILTER))
        topic.subscribe(notify_q, filter_policy=allowlist_filter(NOTIFICATIONS_FILTER))
        # Analytics: every event, as published, buffered by Firehose into the archive bucket (docs/cost.md:
        # an S3 PUT per event was a quarter of an order's cost).
        self.archive_stream = ArchiveStream(
            self,
            "AnalyticsStream",
            name="analytics",
            naming=naming,
            bucket=analytics_bucket,
            prefix=ANALYTICS_PREFIX,
            log_retention=log_retention(config.consumers.log_retention_days),
            removal_policy=keep,
        )
        topic.archive_to(self.archive_stream.stream, raw_delivery=ANALYTICS_RAW_DELIVERY)
        payment_events.subscribe(paid_q, filter_policy=allowlist_filter(PAID_ORDERS_FILTER))
        payment_events.subscribe(failed_q, filter_policy=allowlist_filter(FAILED_PAYMENTS_FILTER))
        self.topic = topic
        shipping_rule = BusRule(
            self,
            "ShippingRule",
            name="shipping",
            naming=naming,
            event_bus=platform.event_bus,
            pattern=SHIPPING_RULE,
            queue=shipping_q,
            queues=queues,
            removal_policy=keep,
            description="OrderPaid → the shipping queue",
        )

        # Each function is told only of the tables it uses, and granted exactly those
        # (tests/infra/test_grants.py holds the two together).
        # Each function's environment comes from its declaration in orders/settings.py, which the
        # function checks at cold start: a variable's name is written there, once.
        api_fn = RelayFunction(
            self,
            "Api",
            settings=functions,
            handler="orders.handlers.api.handler",
            environment=env.API.environment(
                orders_table=orders.table_name,
                idempotency_table=idempotency.table_name,
                request_key_items=settings.request_key_items,
            ),
            description="POST /orders, GET /orders/{orderId}, POST /orders/{orderId}/cancel",
        )
        orders.grant_read_write_data(api_fn.function)
        # Client Idempotency-Keys bound before the one-write layout: read only (request_key_items).
        idempotency.grant(api_fn.function, "dynamodb:GetItem")
        self.http = self.http_api(
            api_fn,
            routes=[
                (apigw.HttpMethod.POST, "/orders"),
                (apigw.HttpMethod.GET, "/orders/{orderId}"),
                (apigw.HttpMethod.POST, "/orders/{orderId}/cancel"),
            ],
        )

        publisher = OutboxPublisher(
            self,
            "OutboxPublisher",
            settings=functions,
            naming=naming,
            queues=queues,
            table=orders,
            topic=topic,
            handler="orders.handlers.outbox_publisher.handler",
            environment=env.OUTBOX_PUBLISHER.environment(
                orders_table=orders.table_name,
                events_topic_arn=topic.topic.topic_arn,
                event_bus_name=platform.event_bus.event_bus_name,
            ),
        )
        platform.event_bus.grant_put_events_to(publisher.function)

        inventory_fn = QueueConsumer(
            self,
            "InventoryWorker",
            settings=functions,
            queue=inventory_q,
            handler="orders.handlers.inventory.handler",
            environment=env.INVENTORY.environment(
                orders_table=orders.table_name, inventory_table=inventory.table_name
            ),
            description="OrderCreated / OrderCancelled → reserve / release stock exactly once",
        )
        notifier = QueueConsumer(
            self,
            "Notifier",
            settings=functions,
            queue=notify_q,
            handler="orders.handlers.notifier.handler",
            environment=env.NOTIFIER.environment(
                idempotency_table=idempotency.table_name,
                notify_webhook_url=settings.notify_webhook_url,
                http_timeout_seconds=settings.http_timeout_seconds,
            ),
            description="customer notifications, once per event",
        )
        paid = QueueConsumer(
            self,
            "PaidOrders",
            settings=functions,
            queue=paid_q,
            handler="orders.handlers.paid_orders.handler",
            environment=env.PAID_ORDERS.environment(orders_table=orders.table_name),
            description="PaymentCompleted → order PAID once + OrderPaid",
        )
        failed = QueueConsumer(
            self,
            "FailedPayments",
            settings=functions,
            queue=failed_q,
            handler="orders.handlers.failed_payments.handler",
            environment=env.FAILED_PAYMENTS.environment(orders_table=orders.table_name),
            description="PaymentFailed → order CANCELLED once + OrderCancelled (stock released)",
        )
        shipping = QueueConsumer(
            self,
            "ShippingWorker",
            settings=functions,
            queue=shipping_q,
            handler="orders.handlers.shipping.handler",
            environment=env.SHIPPING.environment(
                orders_table=orders.table_name,
                shipping_api_url=settings.shipping_api_url,
                http_timeout_seconds=settings.http_timeout_seconds,
            ),
            description="OrderPaid (bus rule) → one shipment from the shipping API, recorded on the order",
        )
        # Only the notifier's Powertools guard writes there: every other step's record is the order item.
        idempotency.grant_read_write_data(notifier.function)
        for consumer in (inventory_fn, paid, failed, shipping):
            orders.grant_read_write_data(consumer.function)
        inventory.grant_read_write_data(inventory_fn.function)

        ServiceMonitoring(
            self,
            "Alarms",
            settings=self.monitoring,
            queues=[inventory_q, notify_q, paid_q, failed_q, shipping_q],
            topics=[topic],
            outbox_publishers=[publisher],
            consumers=[inventory_fn, notifier, paid, failed, shipping],
            bus_rules=[shipping_rule],
            kernel_metrics=[
                KernelMetric(
                    "OrphanPayment",
                    label="OrphanPayments",
                    description="orders: a payment completed for an unknown or closed order; it is kept as "
                    "an orphan-payment record. `python -m ops order <id>` shows the order and it; refund or "
                    "attach by hand.",
                ),
                KernelMetric(
                    "ShipmentRefused",
                    label="ShipmentsRefused",
                    description="orders: the shipping API refused a paid order's shipment; the refusal "
                    "is recorded on the order. `python -m ops order <id>` shows it; arrange the shipment by "
                    "hand or refund.",
                ),
                KernelMetric(
                    "PayloadConflict",
                    label="PayloadConflicts",
                    description="orders: an eventId arrived again with a different payload; it was parked, "
                    "not applied. `python -m ops order <id>` lists its parked messages; investigate the "
                    "producer.",
                ),
            ],
        )
        # What `python -m ops smoke` finds the stage by (outputs only: nothing imports them).
        api_url_output(self, "OrdersApiUrl", self.http, "orders API")
        work_queues_output(self, [inventory_q, notify_q, paid_q, failed_q, shipping_q])
        CfnOutput(
            self,
            "InventoryTableName",
            value=inventory.table_name,
            description="Stock levels: python -m ops.seed_stock --table <this>",
        )
        CfnOutput(
            self,
            "AnalyticsBucketName",
            value=analytics_bucket.bucket_name,
            description="The order-event archive, JSON Lines under events/ (orders.archive.read_archive)",
        )
        self.orders_table = orders
        self.inventory_table = inventory
