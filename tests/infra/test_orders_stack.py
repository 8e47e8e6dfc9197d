"""Infra assertions for the orders stack (issue 7): the fan-out, its filters and its policies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def _of(template, kind):
    return {k: v["Properties"] for k, v in template["Resources"].items() if v["Type"] == kind}


def _id(template, path_suffix):
    (logical_id,) = [
        k
        for k, v in template["Resources"].items()
        if v.get("Metadata", {}).get("aws:cdk:path", "").endswith(path_suffix)
    ]
    return logical_id


@pytest.fixture(scope="module")
def orders(app_templates: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return app_templates["relay-dev-orders"]


def _subscription(template, queue_path):
    queue_id = _id(template, queue_path)
    (sub,) = [
        s
        for s in _of(template, "AWS::SNS::Subscription").values()
        if s["Endpoint"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    ]
    return sub


def test_order_events_fan_out_to_three_queues_with_their_filters(orders):
    topic = {"Ref": _id(orders, "OrderEvents/Topic/Resource")}
    inventory = _subscription(orders, "InventoryQueue/Queue/Resource")
    notifications = _subscription(orders, "NotificationQueue/Queue/Resource")
    analytics = _subscription(orders, "AnalyticsQueue/Queue/Resource")
    for sub in (inventory, notifications, analytics):
        assert sub["TopicArn"] == topic
    assert inventory["FilterPolicy"] == {"eventType": ["OrderCreated", "OrderCancelled"]}
    assert notifications["FilterPolicy"] == {"eventType": ["OrderCreated", "OrderPaid", "OrderRejected"]}
    assert "FilterPolicy" not in analytics
    assert analytics["RawMessageDelivery"] is True
    assert not inventory.get("RawMessageDelivery") and not notifications.get("RawMessageDelivery")


def test_paid_orders_queue_subscribes_to_payment_events_for_payment_completed_only(orders):
    sub = _subscription(orders, "PaidOrdersQueue/Queue/Resource")
    assert sub["FilterPolicy"] == {"eventType": ["PaymentCompleted"]}
    # payments' topic, imported across stacks
    assert "Fn::ImportValue" in sub["TopicArn"] and "PaymentEvents" in str(sub["TopicArn"])


@pytest.mark.parametrize(
    "queue", ["InventoryQueue", "NotificationQueue", "AnalyticsQueue", "PaidOrdersQueue"]
)
def test_each_subscribed_queue_admits_sns_only_from_its_topic(orders, queue):
    queue_id = _id(orders, f"{queue}/Queue/Resource")
    sub = _subscription(orders, f"{queue}/Queue/Resource")
    allows = [
        s
        for p in _of(orders, "AWS::SQS::QueuePolicy").values()
        if {"Ref": queue_id} in p["Queues"]
        for s in p["PolicyDocument"]["Statement"]
        if s["Effect"] == "Allow"
    ]
    (allow,) = allows
    assert allow["Principal"] == {"Service": "sns.amazonaws.com"}
    assert allow["Condition"] == {"ArnEquals": {"aws:SourceArn": sub["TopicArn"]}}


def test_routes_need_iam_and_the_stage_logs_access(orders):
    routes = _of(orders, "AWS::ApiGatewayV2::Route")
    assert {r["RouteKey"] for r in routes.values()} == {
        "POST /orders",
        "GET /orders/{orderId}",
        "POST /orders/{orderId}/cancel",
    }
    assert {r["AuthorizationType"] for r in routes.values()} == {"AWS_IAM"}
    (stage,) = _of(orders, "AWS::ApiGatewayV2::Stage").values()
    assert "AccessLogSettings" in stage


def test_orphan_payments_and_payload_conflicts_are_alarmed(orders):
    metrics = {a["MetricName"] for a in _of(orders, "AWS::CloudWatch::Alarm").values()}
    assert {"OrphanPayment", "PayloadConflict"} <= metrics


def test_the_handlers_filter_constants_match_the_stack(orders):
    # The stack imports functions/orders/subscriptions.py: what the handlers' tests deliver with is
    # what is deployed.
    from orders import subscriptions

    assert (
        _subscription(orders, "InventoryQueue/Queue/Resource")["FilterPolicy"]
        == subscriptions.INVENTORY_FILTER
    )
    notifications = _subscription(orders, "NotificationQueue/Queue/Resource")
    assert notifications["FilterPolicy"] == subscriptions.NOTIFICATIONS_FILTER
    assert (
        _subscription(orders, "PaidOrdersQueue/Queue/Resource")["FilterPolicy"]
        == subscriptions.PAID_ORDERS_FILTER
    )
    analytics = _subscription(orders, "AnalyticsQueue/Queue/Resource")
    assert analytics["RawMessageDelivery"] is subscriptions.ANALYTICS_RAW_DELIVERY


def test_the_orders_stack_declares_no_filter_of_its_own():
    import infra.stacks.orders as stack_module

    source = Path(stack_module.__file__).read_text()
    assert "from orders.subscriptions import" in source
    assert '"OrderCreated"' not in source and '"PaymentCompleted"' not in source
