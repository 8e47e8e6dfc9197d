"""The `loyalty` stack: points for paid orders, fed by the app's event bus (the first note's second
use of EventBridge: the order service publishes "order paid" once; rules, not the order service, tell
the others).

app bus ── points rule (OrderPaid, and OrderRejected of a paid order) → points queue → points worker
           → points table: accrued once per order, reversed once when a paid order is rejected
GET /customers/{customerId}/points → the balance and the ledger
"""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_apigatewayv2 as apigw
from constructs import Construct
from loyalty import settings as env

# The bus contract is the order service's (it publishes the events): one place for the pattern.
from orders.subscriptions import POINTS_RULE

from infra.config import StageConfig
from infra.constructs.bus_rule import BusRule
from infra.constructs.function import RelayFunction
from infra.constructs.monitoring import KernelMetric, ServiceMonitoring
from infra.constructs.outputs import api_url_output, work_queues_output
from infra.constructs.queue_consumer import QueueConsumer
from infra.constructs.reliable_queue import ReliableQueue
from infra.constructs.tables import ReliableTable, idempotency_table
from infra.stacks.base import Platform, RelayStack


class LoyaltyStack(RelayStack):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: StageConfig, platform: Platform, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, config=config, service="loyalty", platform=platform, **kwargs)
        naming, keep, functions, queues = self.naming, self.removal_policy, self.functions, config.queues
        protect = config.deletion_protection
        points = ReliableTable(
            self, "Points", name="points", naming=naming, removal_policy=keep, deletion_protection=protect
        ).table
        # Its processed-event markers are no longer written (the points ledger item is the step's record);
        # the table stays: a stateful resource is never removed by a deploy, and its markers expire by TTL.
        idempotency_table(self, naming=naming, removal_policy=keep, deletion_protection=protect)
        points_q = ReliableQueue(
            self, "PointsQueue", name="points", naming=naming, settings=queues, removal_policy=keep
        )
        rule = BusRule(
            self,
            "PointsRule",
            name="points",
            naming=naming,
            event_bus=platform.event_bus,
            pattern=POINTS_RULE,
            queue=points_q,
            queues=queues,
            removal_policy=keep,
            description="OrderPaid, and OrderRejected of a paid order → the points queue",
        )
        worker = QueueConsumer(
            self,
            "PointsWorker",
            settings=functions,
            queue=points_q,
            handler="loyalty.handlers.points.handler",
            environment=env.POINTS.environment(
                points_table=points.table_name,
                points_per_unit=config.loyalty.points_per_unit,
            ),
            description="OrderPaid → points accrued once; OrderRejected of a paid order → reversed once",
        )
        points.grant_read_write_data(worker.function)

        api_fn = RelayFunction(
            self,
            "Api",
            settings=functions,
            handler="loyalty.handlers.api.handler",
            environment=env.API.environment(points_table=points.table_name),
            description="GET /customers/{customerId}/points",
        )
        points.grant_read_data(api_fn.function)
        self.http = self.http_api(
            api_fn,
            routes=[(apigw.HttpMethod.GET, "/customers/{customerId}/points")],
        )
        ServiceMonitoring(
            self,
            "Alarms",
            settings=self.monitoring,
            queues=[points_q],
            consumers=[worker],
            bus_rules=[rule],
            kernel_metrics=[
                KernelMetric(
                    "PayloadConflict",
                    label="PayloadConflicts",
                    description="loyalty: an eventId arrived again with a different payload; it was parked, "
                    "not applied: `python -m ops dlq sample points-dlq`.",
                )
            ],
        )
        # What `python -m ops smoke` finds the stage by (outputs only: nothing imports them).
        api_url_output(self, "LoyaltyApiUrl", self.http, "loyalty API")
        work_queues_output(self, [points_q])
        self.points_table = points
