"""The `payments` stack: the asynchronous payment-operation pipeline.

POST /payments → S3 claim check + ONE DynamoDB transaction {operation PENDING, outbox PaymentRequested}
→ table stream → outbox publisher → SNS payment-events → filtered, enveloped subscriptions →
payment-requests / post-processing / invoice-requests queues → their workers. Payments knows nothing of
invoicing beyond publishing facts; every step is idempotent; clean-up is TTL and S3 lifecycle.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_apigatewayv2 as apigw
from constructs import Construct
from payments import settings as env
from payments.subscriptions import (
    INVOICE_REQUESTS_FILTER,
    PAYMENT_REQUESTS_FILTER,
    POST_PROCESSING_FILTER,
    RAW_DELIVERY,
)

from infra.config import StageConfig
from infra.constructs.buckets import PrivateBucket
from infra.constructs.fanout_topic import FanoutTopic, allowlist_filter
from infra.constructs.function import RelayFunction
from infra.constructs.http_api import HttpApi
from infra.constructs.monitoring import KernelMetric, ServiceMonitoring
from infra.constructs.outbox_publisher import OutboxPublisher
from infra.constructs.queue_consumer import QueueConsumer
from infra.constructs.reliable_queue import ReliableQueue
from infra.constructs.tables import ReliableTable, idempotency_table
from infra.stacks.base import Platform, RelayStack

CLAIM_CHECK_PREFIX = "payments/"
CLAIM_CHECK_GRANT = (
    "Claim-check keys are payments/{operationId}/...: the operation id is only known at run time, so the "
    "grant is scoped to the payments/ prefix of this service's own bucket."
)


class PaymentsStack(RelayStack):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: StageConfig, platform: Platform, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, config=config, service="payments", platform=platform, **kwargs)
        settings = config.payments
        naming, keep, functions, queues = self.naming, self.removal_policy, self.functions, config.queues
        protect = config.deletion_protection

        operations = ReliableTable(
            self,
            "Operations",
            name="operations",
            naming=naming,
            removal_policy=keep,
            deletion_protection=protect,
            stream=True,
        ).table
        idempotency = idempotency_table(
            self, naming=naming, removal_policy=keep, deletion_protection=protect
        ).table
        claim_checks = PrivateBucket(
            self,
            "ClaimChecks",
            expiration_days=settings.claim_check_expiration_days,
            purpose="claim-checks",
            queues=queues,
            removal_policy=keep,
        )
        bucket = claim_checks.bucket

        topic = FanoutTopic(
            self,
            "PaymentEvents",
            name="payment-events",
            naming=naming,
            settings=queues,
            removal_policy=keep,
        )
        requests_q = ReliableQueue(
            self,
            "PaymentRequests",
            name="payment-requests",
            naming=naming,
            settings=queues,
            removal_policy=keep,
        )
        post_q = ReliableQueue(
            self,
            "PostProcessing",
            name="post-processing",
            naming=naming,
            settings=queues,
            removal_policy=keep,
        )
        invoice_q = ReliableQueue(
            self,
            "InvoiceRequests",
            name="invoice-requests",
            naming=naming,
            settings=queues,
            removal_policy=keep,
        )
        for queue, spec in (
            (requests_q, PAYMENT_REQUESTS_FILTER),
            (post_q, POST_PROCESSING_FILTER),
            (invoice_q, INVOICE_REQUESTS_FILTER),
        ):
            topic.subscribe(queue, filter_policy=allowlist_filter(spec), raw_delivery=RAW_DELIVERY)
        self.topic = topic

        # Each function's environment comes from its declaration in payments/settings.py, which the
        # function checks at cold start: a variable's name is written there, once.
        common = {
            "operations_table": operations.table_name,
            "idempotency_table": idempotency.table_name,
            "payments_bucket": bucket.bucket_name,
            "terminal_ttl_days": settings.terminal_ttl_days,
            "failed_ttl_days": settings.failed_ttl_days,
        }

        api_fn = RelayFunction(
            self,
            "Api",
            settings=functions,
            handler="payments.handlers.api.handler",
            environment=env.API.environment(**common, max_body_bytes=settings.max_body_bytes),
            description="POST /payments (202 + operationId), GET /operations/{operationId}",
        )
        operations.grant_read_write_data(api_fn.function)
        # A client's Idempotency-Key: read to answer a retry, put (conditionally, in the operation's
        # transaction) to bind it. Without this every keyed POST /payments was AccessDenied on AWS.
        idempotency.grant(api_fn.function, "dynamodb:GetItem", "dynamodb:PutItem")
        claim_checks.grant_prefix(api_fn.role, CLAIM_CHECK_PREFIX, read=False, why=CLAIM_CHECK_GRANT)
        self.http = HttpApi(
            self,
            "Http",
            name="payments-api",
            naming=naming,
            log_retention_days=config.consumers.log_retention_days,
            removal_policy=keep,
            handler=api_fn,
            routes=[
                (apigw.HttpMethod.POST, "/payments"),
                (apigw.HttpMethod.GET, "/operations/{operationId}"),
            ],
        )

        publisher = OutboxPublisher(
            self,
            "OutboxPublisher",
            settings=functions,
            naming=naming,
            queues=queues,
            table=operations,
            topic=topic,
            handler="payments.handlers.outbox_publisher.handler",
            environment=env.OUTBOX_PUBLISHER.environment(
                operations_table=operations.table_name, events_topic_arn=topic.topic.topic_arn
            ),
        )

        worker = QueueConsumer(
            self,
            "PaymentWorker",
            settings=functions,
            queue=requests_q,
            handler="payments.handlers.payment_worker.handler",
            timeout=Duration.seconds(60),
            environment=env.PAYMENT_WORKER.environment(
                **common,
                legacy_payments_url=settings.legacy_payments_url,
                legacy_timeout_seconds=settings.legacy_timeout_seconds,
                payment_max_age_seconds=settings.payment_max_age_seconds,
                payment_check_base_delay_seconds=settings.payment_check_base_delay_seconds,
            ),
            description="PaymentRequested → legacy payment system → PAYMENT_COMPLETED / FAILED",
        )
        # The worker re-checks "accepted, still processing" payments with delayed messages to itself.
        requests_q.queue.grant_send_messages(worker.function)
        post = QueueConsumer(
            self,
            "PostProcessor",
            settings=functions,
            queue=post_q,
            handler="payments.handlers.post_processor.handler",
            environment=env.POST_PROCESSOR.environment(**common),
            description="PaymentCompleted → invoice input → INVOICE_PENDING + InvoiceRequested",
        )
        invoicer = QueueConsumer(
            self,
            "InvoiceWorker",
            settings=functions,
            queue=invoice_q,
            handler="payments.handlers.invoice_worker.handler",
            timeout=Duration.seconds(60),
            environment=env.INVOICE_WORKER.environment(
                **common,
                invoice_api_url=settings.invoice_api_url,
                legacy_timeout_seconds=settings.legacy_timeout_seconds,
            ),
            description="InvoiceRequested → invoice API → COMPLETED + OperationCompleted",
        )
        for consumer in (worker, post, invoicer):
            operations.grant_read_write_data(consumer.function)
            idempotency.grant_read_write_data(consumer.function)
            claim_checks.grant_prefix(consumer.role, CLAIM_CHECK_PREFIX, read=True, why=CLAIM_CHECK_GRANT)

        ServiceMonitoring(
            self,
            "Alarms",
            settings=self.monitoring,
            queues=[requests_q, post_q, invoice_q],
            topics=[topic],
            outbox_publishers=[publisher],
            consumers=[worker, post, invoicer],
            kernel_metrics=[
                KernelMetric(
                    "PayloadConflict",
                    label="PayloadConflicts",
                    description="payments: an eventId arrived again with a different payload; it was not "
                    "applied. Investigate the producer.",
                )
            ],
        )
        self.operations_table = operations
        self.bucket = bucket
