"""The `flow` stack: one HTTP route, one reliable queue, one consumer, one table, one schedule.

POST /tasks (AWS_IAM) → api function → TaskSubmitted on the tasks queue (202)
tasks queue (+ DLQ) → worker (kernel queue_handler, partial batch failures) → ONE conditional write per
message into the tasks table: the task DONE, or the hour's tick recorded
EventBridge Scheduler, every hour → TickDue on the same queue (with its own DLQ)

Everything comes from Relay's constructs, which own the defaults (DLQ, encryption, TLS-only,
ReportBatchItemFailures, visibility ≥ 6 × timeout, log groups, own roles); the stack only wires them and
grants each function what it calls. Copied into Relay it is a service stack like `infra/stacks/loyalty.py`
(docs/your-first-flow.md, "Add a flow to Relay").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as scheduler_targets
from constructs import Construct
from flow import settings as env
from flow.events import TICK_DUE

from infra.config import StageConfig
from infra.constructs.function import RelayFunction
from infra.constructs.monitoring import KernelMetric, ServiceMonitoring
from infra.constructs.outputs import api_url_output, work_queues_output
from infra.constructs.queue_consumer import QueueConsumer
from infra.constructs.reliable_queue import ReliableQueue, dead_letter_queue
from infra.constructs.tables import ReliableTable
from infra.stacks.base import Platform, RelayStack

FUNCTIONS = Path(__file__).resolve().parent / "functions"


class FlowStack(RelayStack):
    code_root = FUNCTIONS  # this example's `functions/flow/`, not Relay's `functions/`

    def __init__(
        self, scope: Construct, construct_id: str, *, config: StageConfig, platform: Platform, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, config=config, service="flow", platform=platform, **kwargs)
        naming, keep, functions, queues = self.naming, self.removal_policy, self.functions, config.queues

        tasks = ReliableTable(
            self,
            "Tasks",
            name="tasks",
            naming=naming,
            removal_policy=keep,
            deletion_protection=config.deletion_protection,
        ).table
        work = ReliableQueue(self, "Work", name="tasks", naming=naming, settings=queues, removal_policy=keep)

        api_fn = RelayFunction(
            self,
            "Api",
            settings=functions,
            handler="flow.handlers.api.handler",
            environment=env.API.environment(tasks_queue_url=work.queue.queue_url),
            description="POST /tasks → TaskSubmitted on the tasks queue (202)",
        )
        work.queue.grant_send_messages(api_fn.function)
        http = self.http_api(
            api_fn,
            routes=[(apigw.HttpMethod.POST, "/tasks")],
        )

        worker = QueueConsumer(
            self,
            "Worker",
            settings=functions,
            queue=work,
            handler="flow.handlers.worker.handler",
            environment=env.WORKER.environment(tasks_table=tasks.table_name),
            description="TaskSubmitted → the task DONE; TickDue → the hour's tick; one write each",
        )
        # The step reads the task (a duplicate leaves early) and makes its one conditional write.
        tasks.grant(worker.function, "dynamodb:GetItem", "dynamodb:UpdateItem")

        tick_dlq = dead_letter_queue(
            self, "TickDlq", name="tick-dlq", naming=naming, settings=queues, removal_policy=keep
        )
        scheduler.Schedule(
            self,
            "Tick",
            schedule_name=naming("tick"),
            description="flow: the hourly TickDue on the tasks queue",
            schedule=scheduler.ScheduleExpression.rate(Duration.hours(1)),
            time_window=scheduler.TimeWindow.off(),
            target=scheduler_targets.SqsSendMessage(
                work.queue,
                # An envelope (the kernel consumer's contract), keyed by the time it was due.
                input=scheduler.ScheduleTargetInput.from_object(
                    {
                        "eventId": scheduler.ContextAttribute.execution_id,
                        "eventType": TICK_DUE,
                        "eventVersion": "1.0",
                        "occurredAt": scheduler.ContextAttribute.scheduled_time,
                        "correlationId": scheduler.ContextAttribute.execution_id,
                        "ids": {"scheduledTime": scheduler.ContextAttribute.scheduled_time},
                        "payload": {"schedule": scheduler.ContextAttribute.schedule_arn},
                    }
                ),
                dead_letter_queue=tick_dlq,
                retry_attempts=3,
                max_event_age=Duration.hours(1),
            ),
        )

        ServiceMonitoring(
            self,
            "Alarms",
            settings=self.monitoring,
            queues=[work],
            consumers=[worker],
            dead_letter_queues={"tick-dlq": tick_dlq},
            kernel_metrics=[
                KernelMetric(
                    "PayloadConflict",
                    label="PayloadConflicts",
                    description="flow: a task id was submitted again with another title; that event was "
                    "parked in the tasks DLQ, not applied. Investigate the producer.",
                )
            ],
        )
        api_url_output(self, "FlowApiUrl", http, "flow API")
        work_queues_output(self, [work])
