"""Orders on the app's EventBridge bus, end to end through the sandbox: the outbox publisher puts the
integration events on the bus, the emulator matches them against the rules the templates declare (the
sandbox's EventBridge matcher) and delivers them to the rules' queues as EventBridge does -- only where
the queue's policy admits the rule -- and the shipping and points workers apply them once."""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from orders.subscriptions import ORDERS_SOURCE

from emulator.iam_report import bus_deliveries, enforce
from emulator.server import client
from local.sandbox import Sandbox
from ops.seed_stock import seed_stock
from tests.e2e import api
from tests.e2e.test_orders_e2e import get_order, order_in, pay, place, queues_idle, read, wait_for

pytestmark = pytest.mark.e2e

__all__ = ["read"]  # the module-scoped OrdersReader fixture, shared with test_orders_e2e

WORKERS = ("ShippingWorker", "PointsWorker")


def bus_name(sb: Sandbox) -> str:
    return next(
        f.environment["EVENT_BUS_NAME"]
        for f in sb.topology.functions.values()
        if "EVENT_BUS_NAME" in f.environment
    )


def queue_url(sb: Sandbox, suffix: str) -> str:
    return next(url for name, url in sb.topology.queues.items() if name.endswith(suffix))


def points(sb: Sandbox, customer: str) -> dict[str, Any]:
    response = api.get(sb, f"/customers/{customer}/points")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def order_event(event_type: str, *, paid: bool = True, order_id: str | None = None) -> dict[str, Any]:
    """An envelope as the orders outbox publishes it (``orders.intake.order_event``)."""
    order_id = order_id or f"ord-{uuid.uuid4().hex[:8]}"
    payload: dict[str, Any] = {"customerId": "cust-bus", "items": [{"sku": "SKU-A", "quantity": 2}]}
    if event_type == "OrderRejected" and paid:
        payload["paymentOperationId"] = "op-1"
    return {
        "eventId": str(uuid.uuid4()),
        "eventType": event_type,
        "eventVersion": "1.0",
        "occurredAt": "2026-12-01T10:00:00Z",
        "correlationId": "corr-bus",
        "ids": {"orderId": order_id},
        "payload": payload,
    }


def drain(sqs: Any, url: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while True:
        batch = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0, MessageAttributeNames=["All"]
        ).get("Messages", [])
        if not batch:
            return found
        found += batch
        sqs.delete_message_batch(
            QueueUrl=url,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)],
        )


# A mapping's poller already in its long poll (emulator.mappings: 2 s) when the pause starts may still
# take a message (it then makes it visible again): wait that poll out before the test puts events.
POLL_SECONDS = 2.5


@pytest.fixture
def paused_workers(sandbox: Sandbox) -> Iterator[None]:
    with ExitStack() as stack:
        for worker in WORKERS:
            stack.enter_context(sandbox.paused(worker))
        time.sleep(POLL_SECONDS)
        yield


def put(sb: Sandbox, envelope: dict[str, Any]) -> None:
    answer = client("events", sb.endpoint).put_events(
        Entries=[
            {
                "Source": ORDERS_SOURCE,
                "DetailType": envelope["eventType"],
                "Detail": json.dumps(envelope),
                "EventBusName": bus_name(sb),
            }
        ]
    )
    assert answer["FailedEntryCount"] == 0, answer


@pytest.mark.parametrize(
    ("event_type", "paid", "expected"),
    [
        ("OrderPaid", True, {"shipping", "points"}),
        ("OrderRejected", True, {"points"}),  # a paid order rejected: its points are reversed
        ("OrderRejected", False, set()),  # rejected before it was paid: nothing to reverse
        ("OrderCancelled", False, set()),
        ("OrderCreated", False, set()),
    ],
)
def test_each_order_event_on_the_bus_reaches_exactly_the_rules_that_match_it(
    sandbox: Sandbox, paused_workers: None, event_type: str, paid: bool, expected: set[str]
) -> None:
    sqs = client("sqs", sandbox.endpoint)
    urls = {
        "shipping": queue_url(sandbox, "-orders-shipping"),
        "points": queue_url(sandbox, "-loyalty-points"),
    }
    for url in urls.values():
        drain(sqs, url)
    envelope = order_event(event_type, paid=paid)

    put(sandbox, envelope)

    reached = {}
    for name, url in urls.items():
        messages = drain(sqs, url)
        if messages:
            reached[name] = messages
    assert set(reached) == expected
    for messages in reached.values():
        (message,) = messages
        event = json.loads(message["Body"])
        # As EventBridge delivers it: the event, the envelope as its detail, time in ISO-8601.
        assert event["detail"] == envelope and event["detail-type"] == event_type
        assert event["source"] == ORDERS_SOURCE and event["time"].endswith("Z")


@pytest.mark.iam_denials
def test_a_queue_policy_without_the_rule_sends_its_events_to_the_target_dlq(
    sandbox: Sandbox, paused_workers: None
) -> None:
    sqs = client("sqs", sandbox.endpoint)
    queue = queue_url(sandbox, "-orders-shipping")
    dlq = queue_url(sandbox, "-orders-shipping-target-dlq")
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    model = copy.deepcopy(sandbox.topology.iam)
    removed = 0
    for policy in model.resource_policies[queue_arn]:
        statements = policy["document"]["Statement"]
        kept = [s for s in statements if "events.amazonaws.com" not in json.dumps(s.get("Principal"))]
        removed += len(statements) - len(kept)
        policy["document"]["Statement"] = kept
    assert removed == 1, f"expected one statement admitting EventBridge to {queue_arn}, found {removed}"
    drain(sqs, queue)
    drain(sqs, dlq)
    envelope = order_event("OrderPaid")
    enforce(sandbox.endpoint, sandbox.topology, model)
    try:
        put(sandbox, envelope)
    finally:
        enforce(sandbox.endpoint, sandbox.topology)

    assert drain(sqs, queue) == []
    (parked,) = drain(sqs, dlq)
    attributes = {k: v["StringValue"] for k, v in parked["MessageAttributes"].items()}
    assert attributes["ERROR_CODE"] == "AccessDenied"
    assert attributes["RULE_ARN"].endswith("-orders-shipping") and attributes["TARGET_ARN"] == queue_arn
    assert json.loads(parked["Body"])["detail"] == envelope
    counts = bus_deliveries(sandbox.endpoint)
    shipping_rule = next(rule for rule in counts if rule.endswith("-orders-shipping"))
    assert counts[shipping_rule].get("dead-lettered", 0) >= 1


def test_a_paid_order_is_shipped_once_and_credited_once_with_every_bus_batch_delivered_twice(
    sandbox: Sandbox, read: Any
) -> None:
    run = uuid.uuid4().hex[:6]
    sku = f"E2E-BUS-{run}"
    seed_stock({sku: 5}, table=read.inventory_table, ddb_client=read.ddb)
    customer = f"cust-bus-{run}"
    with sandbox.delivering_twice(*WORKERS):
        order_id = place(sandbox, customer, [{"sku": sku, "quantity": 3}])
        wait_for("order reserved", order_in(sandbox, order_id, "RESERVED"))
        pay(sandbox, order_id)
        wait_for("order paid", order_in(sandbox, order_id, "PAID"), timeout=90)
        shipped = wait_for("shipment recorded", lambda: get_order(sandbox, order_id).get("shipment"))
        account = wait_for(
            "points accrued", lambda: points(sandbox, customer)["ledger"] and points(sandbox, customer)
        )
        wait_for("queues idle", lambda: queues_idle(read))

    per_unit = int(
        next(
            f.environment["POINTS_PER_UNIT"]
            for f in sandbox.topology.functions.values()
            if "POINTS_PER_UNIT" in f.environment
        )
    )
    assert shipped["status"] == "REQUESTED"
    assert sandbox.shipping.shipments_by_order()[order_id] == 1
    assert sandbox.shipping.shipments()[f"{order_id}:shipment"] == 1
    assert shipped["shipmentId"] == sandbox.shipping.shipment_for(order_id)["shipmentId"]
    assert account["balance"] == 3 * per_unit
    assert [(e["orderId"], e["kind"], e["points"]) for e in account["ledger"]] == [
        (order_id, "ACCRUAL", 3 * per_unit)
    ]


def test_points_api_refuses_a_bad_customer_id_with_a_4xx_and_answers_an_unknown_one_with_zero(
    sandbox: Sandbox,
) -> None:
    bad = api.get(sandbox, "/customers/%20bad/points?limit=0")
    unknown = points(sandbox, f"nobody-{uuid.uuid4().hex[:6]}")

    assert 400 <= bad.status_code < 500, bad.text
    assert unknown["balance"] == 0 and unknown["ledger"] == []
