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


def _archive_subscription(template):
    (found,) = [r for r in _of(template, "AWS::SNS::Subscription").values() if r["Protocol"] == "firehose"]
    return found


def test_order_events_fan_out_to_two_queues_with_their_filters_and_every_event_to_the_archive(orders):
    topic = {"Ref": _id(orders, "OrderEvents/Topic/Resource")}
    inventory = _subscription(orders, "InventoryQueue/Queue/Resource")
    notifications = _subscription(orders, "NotificationQueue/Queue/Resource")
    analytics = _archive_subscription(orders)
    for sub in (inventory, notifications, analytics):
        assert sub["TopicArn"] == topic
    assert inventory["FilterPolicy"] == {"eventType": ["OrderCreated", "OrderCancelled"]}
    assert notifications["FilterPolicy"] == {"eventType": ["OrderCreated", "OrderPaid", "OrderRejected"]}
    assert "FilterPolicy" not in analytics
    assert analytics["RawMessageDelivery"] is True
    assert analytics["Endpoint"] == {"Fn::GetAtt": [_id(orders, "AnalyticsStream/Stream"), "Arn"]}
    assert (
        analytics["RedrivePolicy"]["deadLetterTargetArn"] == inventory["RedrivePolicy"]["deadLetterTargetArn"]
    )
    assert not inventory.get("RawMessageDelivery") and not notifications.get("RawMessageDelivery")


def test_the_archive_bucket_is_an_output_and_no_queue_or_function_writes_it(orders):
    outputs = orders["Outputs"]
    assert outputs["AnalyticsBucketName"]["Value"] == {"Ref": _id(orders, "Analytics/Bucket/Resource")}
    assert not [q for q in _of(orders, "AWS::SQS::Queue") if q.startswith("AnalyticsQueue")]
    assert not [f for f in _of(orders, "AWS::Lambda::Function") if f.startswith("AnalyticsWriter")]


def test_the_archive_stream_writes_json_lines_under_events_encrypted_as_its_own_role(orders):
    (stream,) = _of(orders, "AWS::KinesisFirehose::DeliveryStream").values()
    props = stream
    assert props["DeliveryStreamType"] == "DirectPut"
    assert props["DeliveryStreamEncryptionConfigurationInput"] == {"KeyType": "AWS_OWNED_CMK"}
    s3 = props["ExtendedS3DestinationConfiguration"]
    assert s3["BucketARN"] == {"Fn::GetAtt": [_id(orders, "Analytics/Bucket/Resource"), "Arn"]}
    assert s3["Prefix"] == "events/dt=!{timestamp:yyyy-MM-dd}/"
    assert s3["ErrorOutputPrefix"].startswith("errors/!{firehose:error-output-type}/")
    assert s3["ProcessingConfiguration"]["Processors"] == [{"Type": "AppendDelimiterToRecord"}]
    assert s3["CloudWatchLoggingOptions"]["Enabled"] is True
    role = s3["RoleARN"]["Fn::GetAtt"][0]
    (policy,) = [
        p["PolicyDocument"]["Statement"]
        for p in _of(orders, "AWS::IAM::Policy").values()
        if {"Ref": role} in p["Roles"]
    ]
    actions = {a for statement in policy for a in statement["Action"]}
    assert not any(a.startswith("s3:Delete") for a in actions) and "s3:PutObject" in actions
    trust = _of(orders, "AWS::IAM::Role")[role]["AssumeRolePolicyDocument"]["Statement"]
    assert [t["Principal"] for t in trust] == [{"Service": "firehose.amazonaws.com"}]


def test_sns_archives_as_a_role_that_may_only_put_records_into_the_stream(orders):
    analytics = _archive_subscription(orders)
    role = analytics["SubscriptionRoleArn"]["Fn::GetAtt"][0]
    trust = _of(orders, "AWS::IAM::Role")[role]["AssumeRolePolicyDocument"]["Statement"]
    assert [t["Principal"] for t in trust] == [{"Service": "sns.amazonaws.com"}]
    (policy,) = [
        p["PolicyDocument"]["Statement"]
        for p in _of(orders, "AWS::IAM::Policy").values()
        if {"Ref": role} in p["Roles"]
    ]
    assert policy == [
        {
            "Action": [
                "firehose:DescribeDeliveryStream",
                "firehose:ListDeliveryStreams",
                "firehose:ListTagsForDeliveryStream",
                "firehose:PutRecord",
                "firehose:PutRecordBatch",
            ],
            "Effect": "Allow",
            "Resource": {"Fn::GetAtt": [_id(orders, "AnalyticsStream/Stream"), "Arn"]},
        }
    ]


def test_paid_orders_queue_subscribes_to_payment_events_for_payment_completed_only(orders):
    sub = _subscription(orders, "PaidOrdersQueue/Queue/Resource")
    # of a payment for an order only: payments' publisher sets order=yes on it
    assert sub["FilterPolicy"] == {"eventType": ["PaymentCompleted"], "order": ["yes"]}
    # payments' topic, imported across stacks
    assert "Fn::ImportValue" in sub["TopicArn"] and "PaymentEvents" in str(sub["TopicArn"])


@pytest.mark.parametrize("queue", ["InventoryQueue", "NotificationQueue", "PaidOrdersQueue"])
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
    assert _archive_subscription(orders)["RawMessageDelivery"] is subscriptions.ANALYTICS_RAW_DELIVERY


def test_the_orders_stack_declares_no_filter_of_its_own():
    import infra.stacks.orders as stack_module

    source = Path(stack_module.__file__).read_text()
    assert "from orders.subscriptions import" in source
    assert '"OrderCreated"' not in source and '"PaymentCompleted"' not in source
