"""The `payments` stack: the asynchronous payment-operation pipeline.

POST /payments → S3 claim check + ONE DynamoDB transaction {operation PENDING, outbox PaymentRequested}
→ table stream → outbox publisher → SNS payment-events → filtered, enveloped subscriptions →
payment-requests / post-processing / invoice-requests queues → their workers. Payments knows nothing of
invoicing beyond publishing facts; every step is idempotent; clean-up is TTL and S3 lifecycle.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Acknowledgment, Duration, Validations
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as scheduler_targets
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct
from payments import settings as env
from payments.subscriptions import (
    INVOICE_REQUESTS_FILTER,
    NOTICES_FILTER,
    PAYMENT_REQUESTS_FILTER,
    POST_PROCESSING_FILTER,
    RAW_DELIVERY,
    SWEEP_DUE,
)

from infra.config import StageConfig
from infra.constructs.buckets import PrivateBucket
from infra.constructs.fanout_topic import FanoutTopic, allowlist_filter
from infra.constructs.function import RelayFunction
from infra.constructs.monitoring import KernelMetric, ServiceMonitoring
from infra.constructs.outbox_publisher import OutboxPublisher
from infra.constructs.outputs import api_url_output, work_queues_output
from infra.constructs.queue_consumer import QueueConsumer
from infra.constructs.reliable_queue import ReliableQueue, dead_letter_queue
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
            deadline_index=True,
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
        notices_q = ReliableQueue(
            self, "Notices", name="notices", naming=naming, settings=queues, removal_policy=keep
        )
        for queue, spec in (
            (requests_q, PAYMENT_REQUESTS_FILTER),
            (post_q, POST_PROCESSING_FILTER),
            (invoice_q, INVOICE_REQUESTS_FILTER),
            (notices_q, NOTICES_FILTER),
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
            "deadline_shards": settings.deadline_shards,
            "deadline_read_shards": settings.deadline_read_shards,
        }
        lifecycle = settings.lifecycle
        budgets = {name: getattr(lifecycle, name) for name in env.LIFECYCLE}

        api_fn = RelayFunction(
            self,
            "Api",
            settings=functions,
            handler="payments.handlers.api.handler",
            environment=env.API.environment(
                **common,
                max_body_bytes=settings.max_body_bytes,
                silence_seconds=lifecycle.silence_seconds,
                callback_allow_loopback_http=settings.callback_allow_loopback_http,
                claim_check_threshold_bytes=settings.claim_check_threshold_bytes,
                request_key_items=settings.request_key_items,
            ),
            description="POST /payments (202 + operationId), GET /operations/{operationId}, POST …/cancel",
        )
        operations.grant_read_write_data(api_fn.function)
        # A client's Idempotency-Key: read to answer a retry, put (conditionally, in the operation's
        # transaction) to bind it. Without this every keyed POST /payments was AccessDenied on AWS.
        idempotency.grant(api_fn.function, "dynamodb:GetItem", "dynamodb:PutItem")
        claim_checks.grant_prefix(api_fn.role, CLAIM_CHECK_PREFIX, read=False, why=CLAIM_CHECK_GRANT)
        self.http = self.http_api(
            api_fn,
            routes=[
                (apigw.HttpMethod.POST, "/payments"),
                (apigw.HttpMethod.GET, "/operations/{operationId}"),
                (apigw.HttpMethod.POST, "/operations/{operationId}/cancel"),
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
            # Transient failures of the legacy system are retried (delay chain) for the step's budget.
            retry_budget=Duration.seconds(lifecycle.payment_budget_seconds),
            environment=env.PAYMENT_WORKER.environment(
                **common,
                **budgets,
                legacy_payments_url=settings.legacy_payments_url,
                legacy_timeout_seconds=settings.legacy_timeout_seconds,
                payment_max_age_seconds=settings.payment_max_age_seconds,
                payment_check_base_delay_seconds=settings.payment_check_base_delay_seconds,
                claim_check_threshold_bytes=settings.claim_check_threshold_bytes,
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
            retry_budget=Duration.seconds(lifecycle.post_processing_budget_seconds),
            environment=env.POST_PROCESSOR.environment(
                **common, **budgets, claim_check_threshold_bytes=settings.claim_check_threshold_bytes
            ),
            description="PaymentCompleted → invoice input → INVOICE_PENDING + InvoiceRequested",
        )
        invoicer = QueueConsumer(
            self,
            "InvoiceWorker",
            settings=functions,
            queue=invoice_q,
            handler="payments.handlers.invoice_worker.handler",
            timeout=Duration.seconds(60),
            retry_budget=Duration.seconds(lifecycle.invoice_budget_seconds),
            environment=env.INVOICE_WORKER.environment(
                **common,
                **budgets,
                invoice_api_url=settings.invoice_api_url,
                legacy_timeout_seconds=settings.legacy_timeout_seconds,
            ),
            description="InvoiceRequested → invoice API → COMPLETED + OperationCompleted",
        )
        for consumer in (worker, post, invoicer):
            operations.grant_read_write_data(consumer.function)
            idempotency.grant_read_write_data(consumer.function)
            claim_checks.grant_prefix(consumer.role, CLAIM_CHECK_PREFIX, read=True, why=CLAIM_CHECK_GRANT)

        # Completion notices: every terminal event -> the client's callback URL, signed with this
        # deployment's key (HMAC-SHA256; receivers verify it, docs/payments.md, "Completion notices").
        signing_key = secretsmanager.Secret(
            self,
            "NoticeSigningKey",
            description="HMAC-SHA256 key that signs payments completion notices (Standard Webhooks: "
            "receivers get whsec_ and this value)",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                exclude_punctuation=True, password_length=64
            ),
        )
        Validations.of(signing_key).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-SMG4",
                reason="Receivers hold a copy of this key to verify notices; rotating it automatically "
                "would make every receiver reject notices until it is handed the new key. Rotate by "
                "hand: the secret may hold the new and the old key, space-separated, and each notice "
                "then carries a signature by both (README, 'Completion notices').",
            )
        )
        notifier = QueueConsumer(
            self,
            "NoticeSender",
            settings=functions,
            queue=notices_q,
            handler="payments.handlers.notice_sender.handler",
            timeout=Duration.seconds(30),
            # A receiver may be down for a while: retried with backoff for this long, then parked.
            retry_budget=Duration.seconds(settings.notice_retry_budget_seconds),
            environment=env.NOTICE_SENDER.environment(
                operations_table=operations.table_name,
                idempotency_table=idempotency.table_name,
                notice_signing_secret_arn=signing_key.secret_arn,
                callback_allow_loopback_http=settings.callback_allow_loopback_http,
                notice_timeout_seconds=settings.notice_timeout_seconds,
            ),
            description="Terminal events → the client's callback URL, signed, once",
        )
        # Reads the operation; its once-guard (Powertools record) lives in the idempotency table.
        operations.grant(notifier.function, "dynamodb:GetItem")
        idempotency.grant(
            notifier.function,
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
        )
        signing_key.grant_read(notifier.function)

        # The sweeper: every few minutes Scheduler puts a SweepDue envelope on the sweeps queue; the
        # sweeper reads the deadline index and re-drives, gives up or re-publishes what is overdue.
        sweeps_q = ReliableQueue(
            self, "Sweeps", name="sweeps", naming=naming, settings=queues, removal_policy=keep
        )
        sweeper = QueueConsumer(
            self,
            "Sweeper",
            settings=functions,
            queue=sweeps_q,
            handler="payments.handlers.sweeper.handler",
            timeout=Duration.seconds(120),
            batch_size=1,
            environment=env.SWEEPER.environment(
                operations_table=operations.table_name,
                events_topic_arn=topic.topic.topic_arn,
                terminal_ttl_days=settings.terminal_ttl_days,
                failed_ttl_days=settings.failed_ttl_days,
                deadline_shards=settings.deadline_shards,
                deadline_read_shards=settings.deadline_read_shards,
                claim_check_expiration_days=settings.claim_check_expiration_days,
                claim_check_warning_days=lifecycle.claim_check_warning_days,
                **budgets,
            ),
            description="Every few minutes: overdue operations → re-drive / give up; unpublished outbox rows",
        )
        # Reads the deadline index (grant_read_write_data covers the table's indexes), moves
        # operations, writes re-drive outbox rows and marks re-published rows.
        operations.grant_read_write_data(sweeper.function)
        # Re-publishes outbox rows whose stream batch failed.
        topic.topic.grant_publish(sweeper.function)
        schedule_dlq = dead_letter_queue(
            self,
            "SweepScheduleDlq",
            name="sweep-schedule-dlq",
            naming=naming,
            settings=queues,
            removal_policy=keep,
        )
        scheduler.Schedule(
            self,
            "SweepSchedule",
            schedule_name=naming("sweep"),
            description="payments sweeper: overdue operations and unpublished outbox rows",
            schedule=scheduler.ScheduleExpression.rate(Duration.minutes(lifecycle.sweep_every_minutes)),
            time_window=scheduler.TimeWindow.off(),
            target=scheduler_targets.SqsSendMessage(
                sweeps_q.queue,
                # An envelope (the kernel consumer's contract): the execution id is unique per run.
                input=scheduler.ScheduleTargetInput.from_object(
                    {
                        "eventId": scheduler.ContextAttribute.execution_id,
                        "eventType": SWEEP_DUE,
                        "eventVersion": "1.0",
                        "occurredAt": scheduler.ContextAttribute.scheduled_time,
                        "correlationId": scheduler.ContextAttribute.execution_id,
                        "payload": {"schedule": scheduler.ContextAttribute.schedule_arn},
                    }
                ),
                dead_letter_queue=schedule_dlq,
                retry_attempts=3,
                # A sweep missed for longer than its period is replaced by the next one.
                max_event_age=Duration.minutes(max(lifecycle.sweep_every_minutes, 1)),
            ),
        )

        ServiceMonitoring(
            self,
            "Alarms",
            settings=self.monitoring,
            queues=[requests_q, post_q, invoice_q, sweeps_q, notices_q],
            topics=[topic],
            outbox_publishers=[publisher],
            consumers=[worker, post, invoicer, sweeper, notifier],
            dead_letter_queues={"sweep-schedule-dlq": schedule_dlq},
            kernel_metrics=[
                KernelMetric(
                    "PayloadConflict",
                    label="PayloadConflicts",
                    description="payments: an eventId arrived again with a different payload; it was parked, "
                    "not applied. `python -m ops operation <id>` lists its parked messages; investigate the "
                    "producer.",
                ),
                KernelMetric(
                    "OperationsOverdue",
                    label="OperationsOverdue",
                    description="payments: the sweeper found operations silent past their deadline (their "
                    "step's message was gone or the step ran out of budget); it re-drove or ended them. "
                    "The sweeper's log names each; `python -m ops operation <id>` shows one (deadline, "
                    "parked messages); `python -m ops replay <id> --reason ...` re-drives one by hand.",
                ),
                KernelMetric(
                    "ClaimChecksExpiring",
                    label="ClaimChecksExpiring",
                    description="payments: a non-terminal operation's stored request is within "
                    "claim_check_warning_days of the bucket's expiry; finish or end it before it is lost "
                    "(`python -m ops operation <id>`, `python -m ops replay <id>`).",
                ),
                KernelMetric(
                    "PaymentUnresolved",
                    label="PaymentsUnresolved",
                    description="payments: the legacy system could not say whether it charged an operation "
                    "within the reconciliation budget (PAYMENT_UNRESOLVED). Reconcile it by hand under "
                    "{operationId}:payment; `python -m ops operation <id>` shows its history.",
                ),
                KernelMetric(
                    "InvoiceFailed",
                    label="InvoicesFailed",
                    description="payments: an operation was charged but its invoice was refused or could "
                    "not be issued in time (INVOICE_FAILED). `python -m ops operation <id>`: its error has "
                    "the payment reference and the reason.",
                ),
            ],
        )
        # What `python -m ops smoke` finds the stage by (outputs only: nothing imports them).
        api_url_output(self, "PaymentsApiUrl", self.http, "payments API")
        work_queues_output(self, [requests_q, post_q, invoice_q, sweeps_q, notices_q])
        self.operations_table = operations
        self.bucket = bucket
