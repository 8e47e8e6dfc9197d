"""The loyalty stack on moto, provisioned from its template -- and the EventBridge hop in front of it,
played in-test.

``create_world()`` provisions the loyalty stack (and the core stack it imports the app's event bus
and the parked ledger from) with ``tests.handlers.stack_world``: the points table, the idempotency
table, the points queue with its DLQ and the bus rule that feeds it. The rule's target is an SQS
queue, so what the points worker receives is an EventBridge event whose ``detail`` is the envelope
(``send`` wraps it as the rule would deliver it). ``order_paid`` / ``order_rejected`` build the
events as the order service publishes them (``orders.fulfilment.mark_paid`` / ``_reject``).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orders.subscriptions import ORDER_PAID, ORDER_REJECTED, ORDERS_SOURCE

from relay.ddb import deserialize_item
from relay.envelope import Envelope, new_envelope
from tests.builders import (
    ACCOUNT,
    FakeContext,
    environment,
    eventbridge_wrapped,
    failed_ids,  # noqa: F401  (re-exported to the tests)
    record_from_received,
    retry_copy,
)
from tests.handlers.stack_world import StackWorld, aws, plan, provision

REGION = "us-east-1"
POINTS_HANDLER = "loyalty.handlers.points.handler"
API_HANDLER = "loyalty.handlers.api.handler"
_PLAN = plan("loyalty")
POINTS_TABLE = _PLAN.env()["POINTS_TABLE"]
# No function is told of it any more (the ledger item is each step's record); found by its name.
IDEMPOTENCY_TABLE = next(t for t in _PLAN.topology.tables if t.endswith("-idempotency"))
# The points queue, by the name the stack gives it (without its prefix), found by its consumer.
POINTS = _PLAN.queue_for(POINTS_HANDLER)

Items = Sequence[Mapping[str, Any]]
MUGS = ({"sku": "SKU-MUG", "quantity": 2}, {"sku": "SKU-TEAPOT", "quantity": 1})


@dataclass
class LoyaltyWorld:
    ddb: Any
    sqs: Any
    events: Any
    queue_url: str
    queue_arn: str
    dlq_url: str
    stack: StackWorld

    def env(self) -> dict[str, str]:
        """The functions' environment from the template, with the test's overrides."""
        return self.stack.env()

    def consumer_env(self) -> dict[str, str]:
        """What the points worker sets on top of ``env()`` (nothing, while it is the only consumer)."""
        return self.stack.function_env(self.stack.function(POINTS_HANDLER))

    # state ---------------------------------------------------------------------------------------

    def items(self, customer_id: str | None = None) -> list[dict[str, Any]]:
        """The points table's items (one customer's partition), in key order."""
        found = [
            deserialize_item(i) for i in self.ddb.scan(TableName=POINTS_TABLE, ConsistentRead=True)["Items"]
        ]
        if customer_id is not None:
            found = [i for i in found if i["pk"] == f"CUSTOMER#{customer_id}"]
        return sorted(found, key=lambda i: (i["pk"], i["sk"]))

    def balance(self, customer_id: str) -> int | None:
        """The BALANCE item's value; ``None`` when the customer has none."""
        item = self.ddb.get_item(
            TableName=POINTS_TABLE,
            Key={"pk": {"S": f"CUSTOMER#{customer_id}"}, "sk": {"S": "BALANCE"}},
            ConsistentRead=True,
        ).get("Item")
        return int(deserialize_item(item)["balance"]) if item else None

    def order_points(self, customer_id: str, order_id: str) -> dict[str, Any] | None:
        item = self.ddb.get_item(
            TableName=POINTS_TABLE,
            Key={"pk": {"S": f"CUSTOMER#{customer_id}"}, "sk": {"S": f"ORDER#{order_id}"}},
            ConsistentRead=True,
        ).get("Item")
        return deserialize_item(item) if item else None

    def markers(self) -> list[dict[str, Any]]:
        """Everything in the stack's idempotency table (processed-event markers: none are written)."""
        return [deserialize_item(i) for i in self.ddb.scan(TableName=IDEMPOTENCY_TABLE)["Items"]]

    # the bus rule ---------------------------------------------------------------------------------

    def points_rule(self) -> dict[str, Any]:
        """The rule whose target is the points queue, as moto's EventBridge holds it (DescribeRule)."""
        (rule,) = [r for r in self.stack.topology.rules if any(t.arn == self.queue_arn for t in r.targets)]
        described: dict[str, Any] = self.events.describe_rule(Name=rule.name, EventBusName=rule.event_bus)
        return described

    # queues --------------------------------------------------------------------------------------

    def _receive(self, url: str) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        while batch := self.sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=30,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", []):
            messages.extend(batch)
        return messages

    def waiting(self) -> list[dict[str, Any]]:
        """What is visible on the points queue (a retry copy would be here)."""
        return self._receive(self.queue_url)

    def retry_copy(self, *, attempt: int = 1) -> dict[str, Any]:
        """The one delayed copy the consumer re-sent to retry a transient failure."""
        return retry_copy(self.sqs, self.queue_url, attempt=attempt)

    def parked(self) -> list[dict[str, Any]]:
        return self._receive(self.dlq_url)

    def parked_reasons(self) -> list[str]:
        return [m["MessageAttributes"]["relay.errorClass"]["StringValue"] for m in self.parked()]

    def parked_errors(self) -> list[tuple[str, str]]:
        """(error class, error message) of every parked message."""
        return [
            (
                m["MessageAttributes"]["relay.errorClass"]["StringValue"],
                m["MessageAttributes"]["relay.errorMessage"]["StringValue"],
            )
            for m in self.parked()
        ]

    def lambda_event(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        return {"Records": [record_from_received(m, self.queue_arn) for m in messages]}

    def send(self, *envelopes: Envelope | str) -> dict[str, Any]:
        """Put the envelopes on the points queue as the bus rule delivers them (an EventBridge event,
        detail-type = eventType, source = the order service's, a fresh event id each time) and
        receive them back as a Lambda SQS event with genuine receipt handles."""
        for env in envelopes:
            body = (
                env
                if isinstance(env, str)
                else eventbridge_wrapped(env, detail_type=env.event_type, source=ORDERS_SOURCE)
            )
            self.sqs.send_message(QueueUrl=self.queue_url, MessageBody=body)
        event = self.lambda_event(self._receive(self.queue_url))
        assert len(event["Records"]) == len(envelopes), "not every message came back"
        return event


def create_world(overrides: dict[str, str] | None = None) -> LoyaltyWorld:
    """Call inside ``mock_aws``."""
    stack = provision("loyalty", overrides)
    queue = stack.consumers()[POINTS]
    return LoyaltyWorld(
        ddb=aws("dynamodb"),
        sqs=aws("sqs"),
        events=aws("events"),
        queue_url=queue.url,
        queue_arn=queue.arn,
        dlq_url=queue.dlq_url,
        stack=stack,
    )


def deliver(world: LoyaltyWorld, *envelopes: Envelope | str, times: int = 1) -> dict[str, Any]:
    """Deliver the envelopes to the points worker as one batch, ``times`` times (the same batch again,
    as after a lost acknowledgement); returns the last partial batch response."""
    from loyalty.handlers import points

    event = world.send(*envelopes)
    response: dict[str, Any] = {}
    with environment(world.consumer_env()):
        for _ in range(times):
            response = points.handler(event, FakeContext())
    return response


# the order service's events -------------------------------------------------------------------------


def order_paid(
    order_id: str,
    *,
    customer_id: str = "cust-7",
    items: Items = MUGS,
    operation_id: str = "op-1",
    payment_id: str | None = "pay-1",
    identity: Sequence[str] | None = None,
) -> Envelope:
    """OrderPaid as ``orders.fulfilment.mark_paid`` publishes it (``orders.intake.order_event``:
    identity [orderId, "paid"]; ids orderId + operationId; payload customerId, operationId, items,
    paymentId)."""
    payload: dict[str, Any] = {"customerId": customer_id, "operationId": operation_id, "items": list(items)}
    if payment_id is not None:
        payload["paymentId"] = payment_id
    return new_envelope(
        ORDER_PAID,
        identity=list(identity or [order_id, "paid"]),
        ids={"orderId": order_id, "operationId": operation_id},
        payload=payload,
        correlation_id=f"corr-{order_id}",
        causation_id=f"evt-payment-{order_id}",
    )


def order_rejected(
    order_id: str,
    *,
    customer_id: str = "cust-7",
    items: Items = MUGS,
    payment_operation_id: str | None = "op-1",
) -> Envelope:
    """OrderRejected as ``orders.fulfilment._reject`` publishes it: the shortage, the lines, and --
    only when the order had been paid -- ``paymentOperationId``."""
    payload: dict[str, Any] = {
        "customerId": customer_id,
        "code": "InsufficientStock",
        "reason": "insufficient stock for SKU SKU-MUG: 2 requested, 1 available",
        "sku": "SKU-MUG",
        "requested": 2,
        "items": list(items),
        "available": 1,
    }
    if payment_operation_id is not None:
        payload["paymentOperationId"] = payment_operation_id
    return new_envelope(
        ORDER_REJECTED,
        identity=[order_id, "rejected"],
        ids={"orderId": order_id},
        payload=payload,
        correlation_id=f"corr-{order_id}",
        causation_id=f"evt-created-{order_id}",
    )


def order_event(event_type: str, order_id: str, **payload: Any) -> Envelope:
    """Any other order event (OrderCreated, OrderCancelled), shaped as ``order_event`` makes them."""
    return new_envelope(
        event_type,
        identity=[order_id, event_type.removeprefix("Order").lower()],
        ids={"orderId": order_id},
        payload={"customerId": "cust-7", **payload},
        correlation_id=f"corr-{order_id}",
    )


def bus_event(env: Envelope) -> dict[str, Any]:
    """The EventBridge event the outbox publisher puts on the app bus for ``env``."""
    event: dict[str, Any] = json.loads(
        eventbridge_wrapped(env, detail_type=env.event_type, source=ORDERS_SOURCE)
    )
    return event


# the HTTP API ------------------------------------------------------------------------------------


def http_event(method: str, path: str, *, query: Mapping[str, str] | None = None) -> dict[str, Any]:
    """An API Gateway HTTP API (payload format 2.0) event, IAM-authorized as the route is."""
    from urllib.parse import urlencode

    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": urlencode(query or {}),
        "headers": {"content-type": "application/json"},
        "requestContext": {
            "accountId": ACCOUNT,
            "apiId": "loyalty-api",
            "authorizer": {"iam": {"accountId": ACCOUNT, "userArn": f"arn:aws:iam::{ACCOUNT}:user/tester"}},
            "domainName": "loyalty-api.execute-api.us-east-1.amazonaws.com",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": "pytest",
            },
            "requestId": f"req-{uuid.uuid4().hex[:12]}",
            "routeKey": "$default",
            "stage": "$default",
            "time": "01/Dec/2026:10:00:00 +0000",
            "timeEpoch": int(time.time() * 1000),
        },
        "body": None,
        "isBase64Encoded": False,
    }
    if query:
        event["queryStringParameters"] = dict(query)
    return event


def get_points(customer_id: str, **query: str) -> dict[str, Any]:
    from loyalty.handlers import api

    response: dict[str, Any] = api.handler(
        http_event("GET", f"/customers/{customer_id}/points", query=query), FakeContext()
    )
    return response


def body_of(response: Mapping[str, Any]) -> Any:
    return json.loads(response["body"])
