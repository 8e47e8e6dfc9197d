"""ops doctor: the SNS → SQS → Lambda checklist passes on what the stacks deploy and names each break."""

from __future__ import annotations

import json

import pytest
from moto.sns.models import sns_backends

from ops.__main__ import main
from ops.app import App
from ops.doctor import Check, Doctor, raw_delivery_expected, sns_source_arns
from tests.ops.world import ACCOUNT, REGION, Deployed


def _failed(checks: list[Check]) -> list[str]:
    return [f"{c.subject}: {c.name}: {c.detail}" for c in checks if not c.ok]


def _by(checks: list[Check], subject: str, starts: str) -> Check:
    (found,) = [c for c in checks if c.subject == subject and c.name.startswith(starts)]
    return found


def test_the_synthesized_payments_stack_passes_every_check(sandbox_app: App) -> None:
    checks = Doctor(sandbox_app).run()

    assert _failed(checks) == []
    subjects = {c.subject for c in checks}
    assert {
        "payments-payment-requests",
        "payments-post-processing",
        "payments-invoice-requests",
        "payments-sweeps",
    } <= subjects
    requests = [c.name for c in checks if c.subject == "payments-payment-requests"]
    assert requests == [
        "subscription to payments-payment-events confirmed",
        "raw delivery from payments-payment-events",
        "undeliverable DLQ of the payments-payment-events subscription",
        "queue policy admits only payments-payment-events",
        "not encrypted with alias/aws/sqs",
        "visibility >= 6 × payments-PaymentWorkerFunction4E210E59's timeout",
        "a DLQ with maxReceiveCount >= 5",
        "payments-PaymentWorkerFunction4E210E59's mapping enabled",
        "payments-PaymentWorkerFunction4E210E59's mapping reports batch item failures",
        "an alarm on payments-payment-requests-dlq",
    ]
    policy = _by(checks, "payments-payment-requests", "queue policy")
    assert "declared in cdk.out" in policy.detail  # the sandbox enforces it; moto's queue has none
    # The sweeps queue is the schedule's target, not SNS's: consumer checks only.
    assert not [c for c in checks if c.subject == "payments-sweeps" and "subscription" in c.name]


def test_a_queue_policy_that_admits_any_topic_fails_with_the_fix(sandbox_app: App) -> None:
    queue = sandbox_app.find_queue("payments-payment-requests", dlq=False)
    sandbox_app.client("sqs").set_queue_attributes(
        QueueUrl=queue.url,
        Attributes={
            "Policy": json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "sns.amazonaws.com"},
                            "Action": "sqs:SendMessage",
                            "Resource": queue.arn,
                        },
                    ],
                }
            )
        },
    )

    check = _by(Doctor(sandbox_app).run(), "payments-payment-requests", "queue policy")

    assert not check.ok
    assert "without an aws:SourceArn condition" in check.detail
    assert "does not admit payment-events" not in check.detail  # unconditioned: it admits it, and any other
    assert "FanoutTopic.subscribe" in check.fix


def test_a_pending_subscription_fails(sandbox_app: App) -> None:
    topic = next(t for t in sandbox_app.topics() if t.short == "payments-payment-events")
    backend = sns_backends[ACCOUNT][REGION]
    (subscription,) = [
        s
        for s in backend.subscriptions.values()
        if s.topic.arn == topic.arn and s.endpoint.endswith(":relay-dev-payments-payment-requests")
    ]
    subscription.attributes["PendingConfirmation"] = "true"

    check = _by(Doctor(sandbox_app).run(), "payments-payment-requests", "subscription to")

    assert not check.ok and "PendingConfirmation" in check.detail


def test_a_deployed_stage_passes_and_each_break_fails_with_exit_1(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    app = deployed.app
    assert main(["doctor"]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert (
        "PASS  raw delivery from orders-order-events: raw; the consumer expects raw "
        "(functions/orders/subscriptions.py ANALYTICS_RAW_DELIVERY)" in out
    )
    assert "PASS  raw delivery from payments-payment-events: enveloped" in out

    sns, sqs, lam, cw = (app.client(s) for s in ("sns", "sqs", "lambda", "cloudwatch"))
    sns.set_subscription_attributes(
        SubscriptionArn=deployed.subscriptions["payments-payment-requests"],
        AttributeName="RawMessageDelivery",
        AttributeValue="true",
    )
    url = deployed.url("payments-payment-requests")
    # (moto drops the Policy on a SetQueueAttributes without one; AWS keeps it)
    policy = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"]
    sqs.set_queue_attributes(
        QueueUrl=url,
        Attributes={"VisibilityTimeout": "120", "KmsMasterKeyId": "alias/aws/sqs", "Policy": policy},
    )
    lam.update_event_source_mapping(
        UUID=deployed.mappings["orders-analytics"], Enabled=False, FunctionResponseTypes=[]
    )
    cw.delete_alarms(AlarmNames=[a.name for a in app.alarms() if "analytics" in a.name])

    assert main(["doctor", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    failed = {(c["subject"], c["check"].split(" ")[0]): c for c in report["checks"] if not c["ok"]}
    assert set(failed) == {
        ("payments-payment-requests", "raw"),
        ("payments-payment-requests", "not"),  # not encrypted with alias/aws/sqs
        ("payments-payment-requests", "visibility"),
        ("orders-analytics", "orders-AnalyticsFunction-AbC123's"),  # mapping enabled + reports failures
        ("orders-analytics", "an"),  # an alarm on the DLQ
    }
    assert report["failed"] == 6
    visibility = failed[("payments-payment-requests", "visibility")]
    assert "visibility 120 s, timeout 60 s (needs >= 360 s)" in visibility["detail"]
    assert "VisibilityTimeout=360" in visibility["fix"]
    assert "RawMessageDelivery --attribute-value false" in failed[("payments-payment-requests", "raw")]["fix"]


def test_the_raw_delivery_expectation_comes_from_the_services_subscription_modules() -> None:
    assert raw_delivery_expected("orders", "analytics") == (
        True,
        "functions/orders/subscriptions.py ANALYTICS_RAW_DELIVERY",
    )
    assert raw_delivery_expected("orders", "inventory")[0] is False
    assert raw_delivery_expected("payments", "payment-requests") == (
        False,
        "functions/payments/subscriptions.py RAW_DELIVERY",
    )
    assert raw_delivery_expected("reports", "verifier") == (
        False,
        "FanoutTopic.subscribe's default (enveloped)",
    )


def test_policy_statements_are_read_for_the_topics_they_admit() -> None:
    topic = "arn:aws:sns:us-east-1:123456789012:relay-dev-payments-payment-events"
    scoped = {
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "sns.amazonaws.com"},
                "Action": ["sqs:SendMessage"],
                "Condition": {"ArnEquals": {"aws:SourceArn": topic}},
            }
        ]
    }
    assert sns_source_arns(scoped) == ({topic}, [])
    anyone = {"Statement": {"Effect": "Allow", "Principal": "*", "Action": "sqs:*"}}
    assert sns_source_arns(anyone)[1] == ["statement 1 lets anyone send without an aws:SourceArn condition"]
    denied = {"Statement": [{"Effect": "Deny", "Principal": "*", "Action": "sqs:*"}]}
    assert sns_source_arns(denied) == (set(), [])
