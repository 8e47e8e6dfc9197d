"""Discovery: the stage's resources found by their names, never asked for by URL."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from ops.app import DECLARED, App, OpsError, add_connection_arguments, connect, sandbox_endpoint
from tests.ops.world import Deployed


def test_queues_are_found_by_the_stage_prefix_with_their_dlq_and_redrive_settings(payments: App) -> None:
    sqs = payments.client("sqs")
    sqs.create_queue(QueueName="relay-prod-payments-payment-requests")  # another stage
    sqs.create_queue(QueueName="relay-dev2-payments-payment-requests")  # a stage whose name starts alike

    queues = {q.short: q for q in payments.queues()}

    assert all(q.name.startswith("relay-dev-") for q in queues.values())
    requests = queues["payments-payment-requests"]
    assert requests.service == "payments"
    assert not requests.is_dlq
    assert requests.dlq is not None and requests.dlq.short == "payments-payment-requests-dlq"
    assert requests.max_receive_count == 5
    assert requests.visibility_timeout == 360  # 6 × the payment worker's 60 s
    assert not requests.fifo
    dlq = queues["payments-payment-requests-dlq"]
    assert dlq.is_dlq and dlq.sources == ("relay-dev-payments-payment-requests",)
    assert not dlq.has_redrive_policy
    # DLQs no RedrivePolicy points at are DLQs too: the topic's, the outbox stream's, the schedule's.
    for short in (
        "payments-payment-events-undeliverable",
        "payments-outbox-stream-dlq",
        "payments-sweep-schedule-dlq",
    ):
        assert queues[short].is_dlq, short


def test_a_dlq_is_named_by_its_short_name_or_an_unambiguous_part_of_it(payments: App) -> None:
    expected = "relay-dev-payments-payment-requests-dlq"
    for text in (expected, "payments-payment-requests-dlq", "payment-requests-dlq", "payments-payment-req"):
        assert payments.find_queue(text, dlq=True).name == expected

    with pytest.raises(OpsError) as ambiguous:
        payments.find_queue("requests-dlq", dlq=True)
    assert "payments-payment-requests-dlq" in str(ambiguous.value)
    assert "payments-invoice-requests-dlq" in str(ambiguous.value)

    with pytest.raises(OpsError) as unknown:
        payments.find_queue("no-such-dlq", dlq=True)
    assert "payments-sweeps-dlq" in str(unknown.value)  # the candidates are listed

    with pytest.raises(OpsError):
        payments.find_queue("payment-requests", dlq=True)  # a queue, not a DLQ: dlq=True looks at DLQs only


def test_topics_subscriptions_and_tables_come_with_what_sns_delivers_by(payments: App) -> None:
    topics = {t.short: t for t in payments.topics()}
    assert "payments-payment-events" in topics
    assert "core-alarms" in topics

    subscription = next(
        s for s in payments.subscriptions() if s.endpoint.endswith(":relay-dev-payments-payment-requests")
    )
    assert subscription.topic.short == "payments-payment-events"
    assert subscription.protocol == "sqs"
    assert not subscription.pending
    assert subscription.raw_delivery is False
    assert subscription.filter_policy == {
        "eventType": ["PaymentRequested", "PaymentRedriveDue", "PaymentReconciliationDue"]
    }
    assert subscription.dlq_arn and subscription.dlq_arn.endswith("payment-events-undeliverable")

    tables = {t.short for t in payments.tables()}
    assert {"payments-operations", "payments-idempotency"} <= tables


def test_functions_mappings_and_alarms_come_from_lambda_and_cloudwatch_on_aws(deployed: Deployed) -> None:
    app = deployed.app

    functions = {f.service: f for f in app.functions()}
    assert functions["payments"].timeout == 60 and functions["payments"].source == "lambda"
    mapping = next(m for m in app.event_source_mappings() if m.source_arn.endswith("payment-requests"))
    assert mapping.enabled and mapping.report_batch_item_failures and mapping.is_sqs
    assert mapping.function_name == functions["payments"].name
    alarm = next(a for a in app.alarms() if "paymentrequests" in a.name)
    assert alarm.dimensions == {"QueueName": "relay-dev-payments-payment-requests-dlq"}
    assert alarm.state in ("OK", "INSUFFICIENT_DATA") and alarm.source == "cloudwatch"


def test_in_the_sandbox_what_moto_lacks_is_read_from_the_templates(sandbox_app: App) -> None:
    # The sandbox runs functions and mappings outside its emulator, and hands queue policies to its IAM
    # enforcer: moto holds none of them (emulator/provision.py). It creates the alarms in CloudWatch.
    assert sandbox_app.client("lambda").list_functions()["Functions"] == []

    worker = next(
        f for f in sandbox_app.functions() if f.handler == "payments.handlers.payment_worker.handler"
    )
    assert worker.timeout == 60 and worker.source == DECLARED
    assert worker.name.startswith("relay-dev-payments-PaymentWorkerFunction")  # as the sandbox names it
    mapping = next(m for m in sandbox_app.event_source_mappings() if m.function_name == worker.name)
    assert mapping.source_arn.endswith(":relay-dev-payments-payment-requests")
    assert mapping.report_batch_item_failures and mapping.enabled and mapping.source == DECLARED
    alarm = next(
        a
        for a in sandbox_app.alarms()
        if a.dimensions.get("QueueName") == "relay-dev-payments-payment-requests-dlq"
    )
    assert alarm.metric_name == "ApproximateNumberOfMessagesVisible" and alarm.source == "cloudwatch"
    assert alarm.state in ("OK", "INSUFFICIENT_DATA")  # nothing parked, nothing evaluated here
    assert sandbox_app.alarms(state="ALARM") == []

    queue = sandbox_app.find_queue("payments-payment-requests", dlq=False)
    policy, where = sandbox_app.queue_policy(queue)
    assert where == DECLARED and policy is not None
    topic = next(t for t in sandbox_app.topics() if t.short == "payments-payment-events")
    conditions = [s.get("Condition", {}).get("ArnEquals", {}) for s in policy["Statement"]]
    assert {"aws:SourceArn": topic.arn} in conditions


def test_a_loopback_endpoint_gets_the_sandbox_region_dummy_credentials_and_the_templates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parser = argparse.ArgumentParser()
    add_connection_arguments(parser)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)

    app = connect(parser.parse_args(["--endpoint-url", "http://127.0.0.1:4566", "--stage", "dev"]))

    assert app.is_local and app.prefix == "relay-dev" and app.effective_region == "us-east-1"
    assert app.templates is not None and app.templates.name == "cdk.out"
    assert app._connection() == {
        "region_name": "us-east-1",
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }
    aws = connect(parser.parse_args(["--region", "eu-west-1", "--stage", "prod"]))
    assert not aws.is_local and aws.templates is None and aws._connection() == {"region_name": "eu-west-1"}
    assert aws.name("payments", "payment-requests") == "relay-prod-payments-payment-requests"


def test_local_reads_the_running_sandboxs_endpoint_and_says_when_none_runs(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"endpoint": "http://127.0.0.1:45123"}))
    assert sandbox_endpoint(state) == "http://127.0.0.1:45123"
    with pytest.raises(OpsError, match="make local"):
        sandbox_endpoint(Path(__file__).parent / "no-such-state.json")
