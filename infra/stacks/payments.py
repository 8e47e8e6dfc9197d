"""The `payments` stack: the asynchronous payment-operation pipeline.

POST /payments → S3 claim check + ONE DynamoDB transaction {operation PENDING, outbox PaymentRequested}
→ table stream → outbox publisher → SNS payment-events → filtered, enveloped subscriptions →
payment-requests / post-processing / invoice-requests queues → their workers. Payments knows nothing of
invoicing beyond publishing facts; every step is idempotent; clean-up is TTL and S3 lifecycle.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Stack, Tags, Validations
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.base import Platform, RelayStack
from infra.constructs.fanout_topic import FanoutTopic
from infra.constructs.http_api import HttpApi
from infra.constructs.queue_consumer import QueueConsumer, RelayFunction
from infra.constructs.reliable_queue import ReliableQueue, dead_letter_queue
from infra.constructs.tables import ReliableTable, idempotency_table
from infra.guards import MIN_EXPIRATION_TAG

# Enveloped (not raw) delivery: the SNS notification keeps the topic ARN, MessageId and timestamp for
# tracing, and message attributes (eventType) stay readable even past SQS's 10-attribute limit for raw
# delivery. The kernel unwraps both, so the choice is about observability, not code.
ENVELOPED = False


def _event_type(*names: str) -> dict[str, sns.SubscriptionFilter]:
    return {"eventType": sns.SubscriptionFilter.string_filter(allowlist=list(names))}


CLAIM_CHECK_PREFIX = "payments/"


def grant_claim_checks(bucket: s3.Bucket, function: RelayFunction, *, read: bool) -> None:
    """Put (and, for workers, get) objects under `payments/` only — not the bucket-wide grant_read_write,
    which would also allow deleting, listing and aborting uploads."""
    actions = ["s3:PutObject", *(["s3:GetObject"] if read else [])]
    function.role.add_to_principal_policy(
        iam.PolicyStatement(actions=actions, resources=[bucket.arn_for_objects(f"{CLAIM_CHECK_PREFIX}*")])
    )
    bucket_id = Stack.of(bucket).get_logical_id(bucket.node.default_child)  # type: ignore[arg-type]
    Validations.of(function.role).acknowledge(
        Acknowledgment(
            id=f"AwsSolutions::AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/{CLAIM_CHECK_PREFIX}*]",
            reason="Claim-check keys are payments/{operationId}/...: the operation id is only known at run "
            "time, so the grant is scoped to the payments/ prefix of this service's own bucket.",
        )
    )


class PaymentsStack(RelayStack):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: StageConfig, platform: Platform, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, config=config, service="payments", platform=platform, **kwargs)
        settings = config.payments

        operations = ReliableTable(self, "Operations", name="operations", stream=True).table
        idempotency = idempotency_table(self).table
        bucket = self._claim_check_bucket(config)

        topic = FanoutTopic(self, "PaymentEvents", name="payment-events")
        requests_q = ReliableQueue(self, "PaymentRequests", name="payment-requests")
        post_q = ReliableQueue(self, "PostProcessing", name="post-processing")
        invoice_q = ReliableQueue(self, "InvoiceRequests", name="invoice-requests")
        topic.subscribe(requests_q, filter_policy=_event_type("PaymentRequested"), raw_delivery=ENVELOPED)
        topic.subscribe(post_q, filter_policy=_event_type("PaymentCompleted"), raw_delivery=ENVELOPED)
        topic.subscribe(invoice_q, filter_policy=_event_type("InvoiceRequested"), raw_delivery=ENVELOPED)
        self.topic = topic

        common = {
            "OPERATIONS_TABLE": operations.table_name,
            "IDEMPOTENCY_TABLE": idempotency.table_name,
            "PAYMENTS_BUCKET": bucket.bucket_name,
            "TERMINAL_TTL_DAYS": str(settings.terminal_ttl_days),
            "FAILED_TTL_DAYS": str(settings.failed_ttl_days),
        }

        api_fn = RelayFunction(
            self,
            "Api",
            handler="payments.api.handler",
            environment={**common, "MAX_BODY_BYTES": str(settings.max_body_bytes)},
            description="POST /payments (202 + operationId), GET /operations/{operationId}",
        )
        operations.grant_read_write_data(api_fn.function)
        grant_claim_checks(bucket, api_fn, read=False)
        self.http = HttpApi(
            self,
            "Http",
            name="payments-api",
            handler=api_fn,
            routes=[
                (apigw.HttpMethod.POST, "/payments"),
                (apigw.HttpMethod.GET, "/operations/{operationId}"),
            ],
        )

        publisher = RelayFunction(
            self,
            "OutboxPublisher",
            handler="payments.outbox_publisher.handler",
            environment={**common, "EVENTS_TOPIC_ARN": topic.topic.topic_arn},
            description="operations table stream → payment-events (outbox rows only)",
        )
        # Failures retry in order; a batch that still fails after the retries is recorded in this DLQ
        # (its stream coordinates), and the outbox rows stay unpublished in the table for a re-drive.
        stream_dlq = dead_letter_queue(self, "OutboxStreamDlq", name="outbox-stream-dlq")
        publisher.function.add_event_source(
            sources.DynamoEventSource(
                operations,
                starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                batch_size=100,
                max_batching_window=Duration.seconds(1),
                report_batch_item_failures=True,
                retry_attempts=20,
                bisect_batch_on_error=False,
                on_failure=sources.SqsDlq(stream_dlq),
            )
        )
        topic.topic.grant_publish(publisher.function)
        operations.grant_write_data(publisher.function)
        Validations.of(publisher.role).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM5[Resource::*]",
                reason="dynamodb:ListStreams does not support resource-level permissions (AWS service "
                "authorization reference); every other stream action is scoped to this table's stream.",
            )
        )
        self.alarms.watch_consumer(publisher.function, label="OutboxPublisher")

        worker = QueueConsumer(
            self,
            "PaymentWorker",
            queue=requests_q,
            handler="payments.payment_worker.handler",
            timeout=Duration.seconds(60),
            environment={
                **common,
                "LEGACY_PAYMENTS_URL": settings.legacy_payments_url,
                "LEGACY_TIMEOUT_SECONDS": str(settings.legacy_timeout_seconds),
                "PAYMENT_MAX_AGE_SECONDS": str(settings.payment_max_age_seconds),
                "PAYMENT_CHECK_BASE_DELAY_SECONDS": str(settings.payment_check_base_delay_seconds),
            },
            description="PaymentRequested → legacy payment system → PAYMENT_COMPLETED / FAILED",
        )
        # The worker re-checks "accepted, still processing" payments with delayed messages to itself.
        requests_q.queue.grant_send_messages(worker.function)
        post = QueueConsumer(
            self,
            "PostProcessor",
            queue=post_q,
            handler="payments.post_processor.handler",
            environment=common,
            description="PaymentCompleted → invoice input → INVOICE_PENDING + InvoiceRequested",
        )
        invoicer = QueueConsumer(
            self,
            "InvoiceWorker",
            queue=invoice_q,
            handler="payments.invoice_worker.handler",
            timeout=Duration.seconds(60),
            environment={
                **common,
                "INVOICE_API_URL": settings.invoice_api_url,
                "LEGACY_TIMEOUT_SECONDS": str(settings.legacy_timeout_seconds),
            },
            description="InvoiceRequested → invoice API → COMPLETED + OperationCompleted",
        )
        for consumer in (worker, post, invoicer):
            operations.grant_read_write_data(consumer.function)
            idempotency.grant_read_write_data(consumer.function)
            grant_claim_checks(bucket, consumer, read=True)

        self.alarms.watch_kernel_metric(
            "PayloadConflict",
            label="PayloadConflicts",
            description="payments: an eventId arrived again with a different payload; it was not applied. "
            "Investigate the producer.",
        )
        self.operations_table = operations
        self.bucket = bucket

    def _claim_check_bucket(self, config: StageConfig) -> s3.Bucket:
        access_logs = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(90))],
            removal_policy=RemovalPolicy.DESTROY,
            auto_delete_objects=False,
        )
        Validations.of(access_logs).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-S1",
                reason="This is the access-log bucket of the claim-check bucket; logging it to itself "
                "would loop.",
            )
        )
        expiration = config.payments.claim_check_expiration_days
        bucket = s3.Bucket(
            self,
            "ClaimChecks",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=False,
            server_access_logs_bucket=access_logs,
            server_access_logs_prefix="claim-checks/",
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(expiration))],
            removal_policy=RemovalPolicy.DESTROY,
        )
        # The guard RELAY-S3-EXPIRY reads this: objects must outlive queue retention + the redrive window.
        Tags.of(bucket).add(
            MIN_EXPIRATION_TAG, str(config.queues.retention_days + config.queues.dlq_retention_days)
        )
        return bucket
