"""Infra assertions for the payments stack, on the app exactly as `make synth` builds it."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="module")
def payments(app_templates: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return app_templates["relay-dev-payments"]


def _of(template, kind):
    return {k: v["Properties"] for k, v in template["Resources"].items() if v["Type"] == kind}


def _id(template, path_suffix):
    (logical_id,) = [
        k
        for k, v in template["Resources"].items()
        if v.get("Metadata", {}).get("aws:cdk:path", "").endswith(path_suffix)
    ]
    return logical_id


def test_every_route_requires_iam_authorization(payments):
    routes = _of(payments, "AWS::ApiGatewayV2::Route")
    assert {r["RouteKey"] for r in routes.values()} == {
        "POST /payments",
        "GET /operations/{operationId}",
        "POST /operations/{operationId}/cancel",
    }
    for route in routes.values():
        assert route["AuthorizationType"] == "AWS_IAM"


def test_the_stage_writes_access_logs(payments):
    (stage,) = _of(payments, "AWS::ApiGatewayV2::Stage").values()
    assert stage["StageName"] == "$default"
    settings = stage["AccessLogSettings"]
    assert "AccessLogs" in str(settings["DestinationArn"])
    assert "$context.requestId" in settings["Format"]


def test_operations_table_streams_new_and_old_images_to_the_outbox_publisher(payments):
    table_id = _id(payments, "Operations/Table/Resource")
    table = payments["Resources"][table_id]["Properties"]
    assert table["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}
    (mapping,) = [
        m for m in _of(payments, "AWS::Lambda::EventSourceMapping").values() if "StreamArn" in str(m)
    ]
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": [table_id, "StreamArn"]}
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["StartingPosition"] == "TRIM_HORIZON"
    # One lane per shard: each invocation takes the whole batching window (five lanes ran the publisher
    # 0.83 times per payment instead of 0.17, docs/cost.md); ordered per partition key either way.
    assert mapping["ParallelizationFactor"] == 1
    dlq_id = _id(payments, "OutboxPublisher/StreamDlq/Resource")
    assert mapping["DestinationConfig"]["OnFailure"]["Destination"] == {"Fn::GetAtt": [dlq_id, "Arn"]}


@pytest.mark.parametrize(
    ("queue", "event_type", "redrive"),
    [
        ("PaymentRequests", "PaymentRequested", "PaymentRedriveDue"),
        ("PostProcessing", "PaymentCompleted", "PostProcessingRedriveDue"),
        ("InvoiceRequests", "InvoiceRequested", "InvoiceRedriveDue"),
    ],
)
def test_each_queue_subscribes_to_payment_events_with_its_filter_enveloped(
    payments, queue, event_type, redrive
):
    queue_id = _id(payments, f"{queue}/Queue/Resource")
    topic_id = _id(payments, "PaymentEvents/Topic/Resource")
    (sub,) = [
        s
        for s in _of(payments, "AWS::SNS::Subscription").values()
        if s["Endpoint"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    ]
    assert sub["TopicArn"] == {"Ref": topic_id}
    # Its step's event, and the sweeper's re-drive of that step (the payment step also hears the
    # sweeper's reconciliation request); never another step's.
    types = sub["FilterPolicy"]["eventType"]
    assert types[:2] == [event_type, redrive]
    assert set(types[2:]) <= {"PaymentReconciliationDue"}
    assert not sub.get("RawMessageDelivery")


def test_claim_check_bucket_is_private_encrypted_tls_only_and_expires_after_the_redrive_window(payments):
    bucket_id = _id(payments, "ClaimChecks/Bucket/Resource")
    bucket = payments["Resources"][bucket_id]["Properties"]
    assert bucket["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"][0][
        "ServerSideEncryptionByDefault"
    ] == {"SSEAlgorithm": "AES256"}
    (rule,) = bucket["LifecycleConfiguration"]["Rules"]
    assert rule["ExpirationInDays"] == 30 >= 4 + 14
    (policy,) = [
        p for p in _of(payments, "AWS::S3::BucketPolicy").values() if p["Bucket"] == {"Ref": bucket_id}
    ]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in policy["PolicyDocument"]["Statement"]
    )


def test_functions_get_only_the_claim_check_prefix_of_the_bucket(payments):
    bucket_id = _id(payments, "ClaimChecks/Bucket/Resource")
    for policy in _of(payments, "AWS::IAM::Policy").values():
        for statement in policy["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if any(a.startswith("s3:") for a in actions):
                assert set(actions) <= {"s3:PutObject", "s3:GetObject"}
                assert statement["Resource"] == {
                    "Fn::Join": ["", [{"Fn::GetAtt": [bucket_id, "Arn"]}, "/payments/*"]]
                }


def test_payment_worker_can_send_delayed_rechecks_to_its_own_queue(payments):
    queue_id = _id(payments, "PaymentRequests/Queue/Resource")
    role_id = _id(payments, "PaymentWorker/Role/Resource")
    sends = [
        s
        for p in _of(payments, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Roles"]
        for s in p["PolicyDocument"]["Statement"]
        if "sqs:SendMessage" in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    ]
    assert {"Fn::GetAtt": [queue_id, "Arn"]} in [s["Resource"] for s in sends]


def test_alarms_cover_dlqs_consumers_and_payload_conflicts(payments):
    alarms = _of(payments, "AWS::CloudWatch::Alarm").values()
    metrics = [a["MetricName"] for a in alarms]
    # 3 work DLQs + the notices DLQ + the sweeps DLQ + the sweep schedule's DLQ, undeliverable, stream
    assert metrics.count("ApproximateNumberOfMessagesVisible") == 8
    assert metrics.count("Errors") == 6  # outbox publisher + three workers + the notice sender + the sweeper
    for lifecycle in ("OperationsOverdue", "ClaimChecksExpiring", "PaymentUnresolved", "InvoiceFailed"):
        (alarm,) = [a for a in alarms if a["MetricName"] == lifecycle]
        assert alarm["Dimensions"] == [{"Name": "service", "Value": "payments"}]
    (conflicts,) = [a for a in alarms if a["MetricName"] == "PayloadConflict"]
    assert conflicts["Dimensions"] == [{"Name": "service", "Value": "payments"}]
    assert len(_of(payments, "AWS::CloudWatch::Dashboard")) == 1
