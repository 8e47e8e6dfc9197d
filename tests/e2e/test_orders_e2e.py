"""Orders end to end through the local sandbox: the fan-out, stock, notifications and paid orders.

The main test runs with the sandbox's duplicate-delivery chaos on every orders function: each stream
batch is published twice (so SNS hands each queue two copies) and each SQS batch is invoked twice, so
every consumer sees every message at least four times. Stock, notifications and analytics must still
move exactly once.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import requests

from local.emulator import client
from local.sandbox import Sandbox
from ops.seed_stock import seed_stock

pytestmark = pytest.mark.e2e

ORDER_STACK = "-orders-"  # every orders function's name contains it (<stack>-<logicalId>)


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.time() + timeout
    value = None
    while time.time() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"{what}: not reached within {timeout} s (last: {value!r})")


def table(sb: Sandbox, suffix: str) -> str:
    return next(t for t in sb.topology.tables if t.endswith(f"-orders-{suffix}"))


def get_order(sb: Sandbox, order_id: str) -> dict[str, Any]:
    response = requests.get(f"{sb.api_url}/orders/{order_id}", timeout=30)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def order_in(sb: Sandbox, order_id: str, status: str) -> Callable[[], dict[str, Any] | None]:
    def probe() -> dict[str, Any] | None:
        order = get_order(sb, order_id)
        return order if order["status"] == status else None

    return probe


def place(sb: Sandbox, customer: str, items: list[dict[str, Any]]) -> str:
    body = {"customerId": customer, "items": items, "currency": "EUR"}
    response = requests.post(
        f"{sb.api_url}/orders", json=body, headers={"Idempotency-Key": uuid.uuid4().hex}, timeout=30
    )
    assert response.status_code == 201, response.text
    return str(response.json()["orderId"])


def pay(sb: Sandbox, order_id: str) -> str:
    body = {
        "paymentId": f"pay-{uuid.uuid4().hex[:10]}",
        "orderId": order_id,
        "amount": "19.90",
        "currency": "EUR",
        "payer": "customer",
        "payee": "relay-shop",
        "details": {},
    }
    response = requests.post(
        f"{sb.api_url}/payments", json=body, headers={"Idempotency-Key": uuid.uuid4().hex}, timeout=30
    )
    assert response.status_code == 202, response.text
    return str(response.json()["operationId"])


def stock(sb: Sandbox, sku: str) -> tuple[int, int]:
    item = client("dynamodb", sb.endpoint).get_item(
        TableName=table(sb, "inventory"),
        Key={"pk": {"S": f"SKU#{sku}"}, "sk": {"S": "STOCK"}},
        ConsistentRead=True,
    )["Item"]
    return int(item["available"]["N"]), int(item["reserved"]["N"])


def reservation_status(sb: Sandbox, order_id: str) -> str | None:
    item = (
        client("dynamodb", sb.endpoint)
        .get_item(
            TableName=table(sb, "inventory"),
            Key={"pk": {"S": f"ORDER#{order_id}"}, "sk": {"S": "RESERVATION"}},
            ConsistentRead=True,
        )
        .get("Item")
    )
    return item["status"]["S"] if item else None


def order_rows(sb: Sandbox, order_id: str, prefix: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = client("dynamodb", sb.endpoint).query(
        TableName=table(sb, "orders"),
        KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
        ExpressionAttributeValues={":pk": {"S": f"ORDER#{order_id}"}, ":prefix": {"S": prefix}},
        ConsistentRead=True,
    )["Items"]
    return items


def events_of(sb: Sandbox, order_ids: list[str]) -> dict[str, str]:
    """eventId -> eventType of every event the orders wrote to their outbox."""
    events = {}
    for order_id in order_ids:
        for row in order_rows(sb, order_id, "OUTBOX#"):
            _, event_type, event_id = row["sk"]["S"].split("#", 2)
            events[event_id] = event_type
    return events


def archived_event_ids(sb: Sandbox) -> list[str]:
    bucket = next(
        f.environment["ANALYTICS_BUCKET"]
        for f in sb.topology.functions.values()
        if "ANALYTICS_BUCKET" in f.environment
    )
    s3 = client("s3", sb.endpoint)
    ids = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="events/"):
        ids += [obj["Key"].rsplit("/", 1)[1].removesuffix(".json") for obj in page.get("Contents", [])]
    return ids


def queues_idle(sb: Sandbox) -> bool:
    sqs = client("sqs", sb.endpoint)
    for name, url in sb.topology.queues.items():
        if ORDER_STACK not in name:
            continue
        attrs = sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        if any(int(v) for v in attrs.values()):
            return False
    return sb.in_flight() == 0


def duplicated(sb: Sandbox) -> int:
    return sum(m.stats.duplicated_records for m in sb.mappings.items) if sb.mappings else 0


def test_orders_flow_end_to_end_exactly_once_with_every_message_delivered_twice(sandbox: Sandbox) -> None:
    run = uuid.uuid4().hex[:6]
    mug, tea, print_ = f"E2E-MUG-{run}", f"E2E-TEA-{run}", f"E2E-PRINT-{run}"
    ddb = client("dynamodb", sandbox.endpoint)
    seed_stock({mug: 10, tea: 5, print_: 1}, table=table(sandbox, "inventory"), ddb_client=ddb)
    duplicated_before = duplicated(sandbox)

    with sandbox.delivering_twice(ORDER_STACK):
        paid = place(sandbox, f"alice-{run}", [{"sku": mug, "quantity": 2}, {"sku": tea, "quantity": 1}])
        cancelled = place(sandbox, f"bob-{run}", [{"sku": mug, "quantity": 3}])
        rejected = place(sandbox, f"carol-{run}", [{"sku": print_, "quantity": 2}])  # only 1 in stock

        wait_for("order reserved", order_in(sandbox, paid, "RESERVED"))
        wait_for("order reserved", order_in(sandbox, cancelled, "RESERVED"))
        refused = wait_for("order rejected for stock", order_in(sandbox, rejected, "REJECTED"))
        assert print_ in refused["rejection"]["reason"]

        response = requests.post(f"{sandbox.api_url}/orders/{cancelled}/cancel", timeout=30)
        assert response.status_code == 200, response.text
        wait_for("stock released", lambda: reservation_status(sandbox, cancelled) == "RELEASED")

        operation = pay(sandbox, paid)
        orphan_operation = pay(sandbox, cancelled)  # paid after it was cancelled: recorded, not applied
        order = wait_for("order paid", order_in(sandbox, paid, "PAID"), timeout=90)
        assert order["paymentOperationId"] == operation
        orphans = wait_for("orphan payment recorded", lambda: order_rows(sandbox, cancelled, "PAYMENT#"), 90)
        assert [o["operationId"]["S"] for o in orphans] == [orphan_operation]
        wait_for("orders queues drained", lambda: queues_idle(sandbox), timeout=60)
        time.sleep(2)  # one more batching window for late duplicates
        wait_for("orders queues drained", lambda: queues_idle(sandbox), timeout=60)

    assert duplicated(sandbox) > duplicated_before, "the duplicate-delivery chaos did not run"

    # Stock moved once per order: what the paid order holds; the cancelled one gave back; the
    # rejected one took nothing.
    assert stock(sandbox, mug) == (8, 2)
    assert stock(sandbox, tea) == (4, 1)
    assert stock(sandbox, print_) == (1, 0)
    assert get_order(sandbox, cancelled)["status"] == "CANCELLED"

    # One event per fact, each notified (where the customer hears of it) and archived exactly once.
    order_ids = [paid, cancelled, rejected]
    events = events_of(sandbox, order_ids)
    assert sorted(events.values()) == sorted(
        ["OrderCreated"] * 3 + ["OrderCancelled", "OrderRejected", "OrderPaid"]
    )
    notified = {k: n for k, n in sandbox.webhook.deliveries_by_key().items() if k in events}
    expected = {e: 1 for e, t in events.items() if t in ("OrderCreated", "OrderPaid", "OrderRejected")}
    assert notified == expected
    archived = [e for e in archived_event_ids(sandbox) if e in events]
    assert sorted(archived) == sorted(events)

    # Nothing parked in the orders DLQs.
    sqs = client("sqs", sandbox.endpoint)
    for name in sandbox.topology.dlqs:
        if ORDER_STACK in name:
            url = sandbox.topology.queues[name]
            depth = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
            assert depth["Attributes"]["ApproximateNumberOfMessages"] == "0", name


def test_cancel_is_refused_with_409_once_the_order_is_rejected(sandbox: Sandbox) -> None:
    run = uuid.uuid4().hex[:6]
    sku = f"E2E-GONE-{run}"
    seed_stock({sku: 0}, table=table(sandbox, "inventory"), ddb_client=client("dynamodb", sandbox.endpoint))
    order_id = place(sandbox, f"dave-{run}", [{"sku": sku, "quantity": 1}])
    wait_for("order rejected", order_in(sandbox, order_id, "REJECTED"))
    response = requests.post(f"{sandbox.api_url}/orders/{order_id}/cancel", timeout=30)
    assert response.status_code == 409
    assert "REJECTED" in response.json()["message"]


def test_invalid_order_is_rejected_with_field_errors_and_nothing_stored(sandbox: Sandbox) -> None:
    customer = f"erin-{uuid.uuid4().hex[:6]}"
    body = {"customerId": customer, "items": [{"sku": "SKU-RED-MUG", "quantity": 0}], "currency": "EURO"}
    response = requests.post(f"{sandbox.api_url}/orders", json=body, timeout=30)
    assert response.status_code == 400
    fields = {f["field"] for f in response.json()["fields"]}
    assert any("quantity" in f for f in fields) and any("currency" in f for f in fields)
    scanned = client("dynamodb", sandbox.endpoint).scan(
        TableName=table(sandbox, "orders"),
        FilterExpression="customerId = :c",
        ExpressionAttributeValues={":c": {"S": customer}},
    )
    assert scanned["Count"] == 0
    assert requests.get(f"{sandbox.api_url}/orders/{uuid.uuid4()}", timeout=30).status_code == 404
