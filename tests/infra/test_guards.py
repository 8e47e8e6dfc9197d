"""Each synth-time guard makes synth fail, naming the rule and the construct."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from aws_cdk import aws_sqs as sqs
from stacks import bare, consumer, queue


def _violations(body, tmp_path: Path) -> dict[str, set[str]]:
    app = bare(body)
    with pytest.raises(RuntimeError, match=r"Validation ?[Ff]ailed"):
        app.synth()
    report = json.loads(Path(app.outdir, "validation-report.json").read_text())
    found: dict[str, set[str]] = {}
    for plugin in report["pluginReports"]:
        for violation in plugin["violations"]:
            for construct in violation["violatingConstructs"]:
                found.setdefault(violation["ruleName"], set()).add(construct["constructPath"])
    return found


def _function(stack, timeout=30):
    return lambda_.Function(
        stack,
        "Fn",
        runtime=lambda_.Runtime.PYTHON_3_13,
        handler="x.handler",
        code=lambda_.Code.from_inline("def handler(e, c): pass"),
        timeout=Duration.seconds(timeout),
    )


def test_consumed_queue_with_short_visibility_timeout_fails_synth(tmp_path):
    def body(stack):
        rq = queue(stack, "Work", name="work", visibility_timeout=Duration.seconds(60))
        _function(stack).add_event_source(sources.SqsEventSource(rq.queue, report_batch_item_failures=True))

    assert _violations(body, tmp_path) == {"RELAY-VISIBILITY": {"svc/Work/Queue/Resource"}}


def test_max_receive_count_below_5_fails_synth(tmp_path):
    def body(stack):
        dlq = sqs.Queue(stack, "Dlq")
        sqs.Queue(stack, "Eager", dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=2))

    assert _violations(body, tmp_path) == {"RELAY-MAX-RECEIVE": {"svc/Eager/Resource"}}


def test_sns_subscribed_queue_with_aws_managed_sqs_key_fails_synth(tmp_path):
    def body(stack):
        # CDK's own SqsSubscription refuses aws/sqs; an escape hatch (or a raw L1) does not.
        dlq = sqs.Queue(stack, "Dlq")
        queue = sqs.Queue(
            stack, "Inbox", dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=5)
        )
        sns.Topic(stack, "Topic").add_subscription(subs.SqsSubscription(queue))
        cfn = queue.node.default_child
        cfn.add_property_override("KmsMasterKeyId", "alias/aws/sqs")
        cfn.add_property_deletion_override("SqsManagedSseEnabled")

    assert _violations(body, tmp_path) == {"RELAY-SNS-AWS-SQS-KEY": {"svc/Inbox/Resource"}}


def test_sqs_event_source_without_report_batch_item_failures_fails_synth(tmp_path):
    def body(stack):
        rq = queue(stack, "Work", name="work", visibility_timeout=Duration.seconds(600))
        _function(stack).add_event_source(sources.SqsEventSource(rq.queue))

    found = _violations(body, tmp_path)
    assert list(found) == ["RELAY-BATCH-FAILURES"]
    (path,) = found["RELAY-BATCH-FAILURES"]
    assert path.startswith("svc/Fn/SqsEventSource")


def test_queue_without_a_dlq_fails_synth(tmp_path):
    def body(stack):
        sqs.Queue(stack, "Orphan")

    assert _violations(body, tmp_path) == {"RELAY-DLQ": {"svc/Orphan/Resource"}}


def test_the_platform_constructs_pass_every_guard():
    def body(stack):
        rq = queue(stack, "Work", name="work")
        consumer(stack, "Worker", queue=rq, handler="svc.worker.handler", timeout=Duration.seconds(60))

    bare(body).synth()  # raises if any guard fires


def test_an_export_of_a_layer_version_or_a_lambda_version_fails_synth_naming_the_fix(tmp_path):
    # Both are replaced whenever their content changes; an exported ARN that another stack imports can
    # then never be updated, and the second deploy after a code change fails.
    (tmp_path / "python").mkdir()

    def body(stack):
        layer = lambda_.LayerVersion(stack, "OwnLayer", code=lambda_.Code.from_asset(str(tmp_path)))
        stack.export_value(layer.layer_version_arn)
        stack.export_value(_function(stack).current_version.function_arn)

    assert _violations(body, tmp_path) == {
        "RELAY-EXPORT-REPLACED": {"svc/OwnLayer/Resource", "svc/Fn/CurrentVersion/Resource"}
    }


def test_the_export_guard_names_the_output_and_the_fix():
    from infra.guards import check_template

    template = {
        "Resources": {"KernelLayer1": {"Type": "AWS::Lambda::LayerVersion", "Properties": {}}},
        "Outputs": {"LayerArn": {"Value": {"Ref": "KernelLayer1"}, "Export": {"Name": "core:LayerArn"}}},
    }
    (finding,) = check_template("core", template)
    assert finding.rule == "RELAY-EXPORT-REPLACED"
    assert "output LayerArn" in finding.message
    assert "RelayStack.layers" in finding.message
    # The same value as a plain output (no export) blocks nothing.
    del template["Outputs"]["LayerArn"]["Export"]
    assert check_template("core", template) == []
