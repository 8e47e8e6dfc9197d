from __future__ import annotations

import pytest
from aws_cdk import Duration, Stack
from aws_cdk.assertions import Template
from stacks import bare, consumer, queue, stage_config

from infra.constructs.layers import RUNTIME


def _mapping(s):
    (mapping,) = [m["Properties"] for m in s.resources("AWS::Lambda::EventSourceMapping").values()]
    return mapping


def _worker(s):
    return s.json["Resources"][s.logical_id("Worker/Function/Resource")]["Properties"]


def test_sqs_event_source_always_reports_batch_item_failures(synthesized):
    assert _mapping(synthesized)["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_event_source_takes_batch_size_window_and_max_concurrency_from_config(synthesized):
    consumers = synthesized.stack.config.consumers
    mapping = _mapping(synthesized)
    assert mapping["BatchSize"] == consumers.batch_size
    assert mapping["MaximumBatchingWindowInSeconds"] == consumers.batching_window_seconds
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": consumers.max_concurrency}


def test_consumed_queue_visibility_is_at_least_6x_function_timeout(synthesized):
    work = synthesized.json["Resources"][synthesized.logical_id("Work/Queue/Resource")]["Properties"]
    assert _worker(synthesized)["Timeout"] == 20
    assert work["VisibilityTimeout"] == 120


def test_consumer_runs_newest_python_on_arm64_with_both_layers(synthesized):
    worker = _worker(synthesized)
    assert worker["Runtime"] == RUNTIME.name == "python3.13"
    assert worker["Architectures"] == ["arm64"]
    assert len(worker["Layers"]) == 2
    # The stack's own layers (a Ref in the same template), never an import from core.
    layer_refs = " ".join(layer["Ref"] for layer in worker["Layers"])
    assert "DependencyLayer" in layer_refs and "KernelLayer" in layer_refs


def test_consumer_log_group_has_retention(synthesized):
    worker = _worker(synthesized)
    log_group_id = worker["LoggingConfig"]["LogGroup"]["Ref"]
    log_group = synthesized.json["Resources"][log_group_id]["Properties"]
    assert log_group["RetentionInDays"] == synthesized.stack.config.consumers.log_retention_days


def test_consumer_powertools_settings_come_from_config(synthesized):
    env = _worker(synthesized)["Environment"]["Variables"]
    config = synthesized.stack.config
    assert env["POWERTOOLS_SERVICE_NAME"] == "svc"
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == config.metrics_namespace
    assert env["POWERTOOLS_LOG_LEVEL"] == config.consumers.log_level
    assert env["RELAY_QUEUE_URL"] == {"Ref": synthesized.logical_id("Work/Queue/Resource")}
    assert env["RELAY_DLQ_URL"] == {"Ref": synthesized.logical_id("Work/Dlq/Resource")}
    assert env["RELAY_VISIBILITY_TIMEOUT_SECONDS"] == "120"


def test_consumer_retries_transient_failures_for_the_stage_retry_budget(synthesized):
    env = _worker(synthesized)["Environment"]["Variables"]
    budget = synthesized.stack.config.consumers.retry_budget_seconds
    assert env["RELAY_RETRY_BUDGET_SECONDS"] == str(budget) == "3600"


def test_consumer_role_grants_only_its_queue_and_dlq(synthesized):
    role_id = synthesized.logical_id("Worker/Role/Resource")
    queue_id = synthesized.logical_id("Work/Queue/Resource")
    dlq_id = synthesized.logical_id("Work/Dlq/Resource")
    statements = [
        statement
        for policy in synthesized.resources("AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    sqs_statements = [s for s in statements if any(str(a).startswith("sqs:") for a in _list(s["Action"]))]
    by_resource = {}
    for statement in sqs_statements:
        for resource in _list(statement["Resource"]):
            by_resource.setdefault(resource["Fn::GetAtt"][0], set()).update(_list(statement["Action"]))
    assert set(by_resource) == {queue_id, dlq_id}
    assert {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"} <= by_resource[queue_id]
    # Its own queue too: a transient failure is re-sent there with a delay (the retry budget's chain).
    assert "sqs:SendMessage" in by_resource[queue_id]
    assert by_resource[dlq_id] == {"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}
    # No AWS-managed policy: logs go only to the function's own log group.
    role = synthesized.json["Resources"][role_id]["Properties"]
    assert "ManagedPolicyArns" not in role


def _consumer_template(**kwargs):
    found = {}

    def body(stack):
        work = queue(stack, "Work", name="work", fifo=kwargs.pop("fifo", False))
        found["stack"] = stack
        consumer(stack, "Worker", queue=work, handler="showcase.worker.handler", **kwargs)

    bare(body)
    stack: Stack = found["stack"]
    return Template.from_stack(stack).to_json()


def _sqs_actions_on(template, path_suffix):
    (target,) = [
        k
        for k, v in template["Resources"].items()
        if v.get("Metadata", {}).get("aws:cdk:path", "").endswith(path_suffix)
    ]
    return {
        action
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::IAM::Policy"
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]
        if {"Fn::GetAtt": [target, "Arn"]} in _list(statement["Resource"])
        for action in _list(statement["Action"])
    }


def _worker_env(template):
    (worker,) = [
        v
        for v in template["Resources"].values()
        if v["Type"] == "AWS::Lambda::Function"
        and v["Properties"].get("Handler") == "showcase.worker.handler"
    ]
    return worker["Properties"]["Environment"]["Variables"]


def test_retry_budget_given_to_the_construct_wins_over_the_stage_default():
    template = _consumer_template(retry_budget=Duration.hours(6))
    assert _worker_env(template)["RELAY_RETRY_BUDGET_SECONDS"] == "21600"


def test_fifo_consumer_has_no_retry_budget_and_may_not_send_to_its_queue():
    # SQS refuses a per-message DelaySeconds on FIFO queues: they keep retrying in place, in order.
    template = _consumer_template(fifo=True)
    assert "RELAY_RETRY_BUDGET_SECONDS" not in _worker_env(template)
    assert "sqs:SendMessage" not in _sqs_actions_on(template, "Work/Queue/Resource")
    assert "sqs:SendMessage" in _sqs_actions_on(template, "Work/Dlq/Resource")


def test_retry_budget_not_shorter_than_the_queue_retention_is_refused():
    # The default retention is 4 days: a message retried in place would expire before being parked.
    with pytest.raises(
        ValueError, match=r"svc/Worker: retry budget 432000 s is not shorter than the retention"
    ):
        _consumer_template(retry_budget=Duration.days(5))
    config = stage_config(
        consumers={**stage_config().consumers.model_dump(), "retry_budget_seconds": 345_600}
    )
    with pytest.raises(
        ValueError, match=r"retry budget 345600 s is not shorter than the retention of queue 'work'"
    ):
        bare(
            lambda stack: consumer(
                stack, "Worker", queue=queue(stack, "Work", name="work"), handler="showcase.worker.handler"
            ),
            config=config,
        )


@pytest.mark.parametrize("budget", [Duration.seconds(30), Duration.days(13)])
def test_retry_budget_outside_the_relay_bounds_is_refused(budget):
    with pytest.raises(ValueError, match=r"is outside 60\.\.1036800 s"):
        _consumer_template(retry_budget=budget)


def test_stage_retry_budget_is_bounded_in_the_config():
    from pydantic import ValidationError

    from infra.config import ConsumerSettings

    assert ConsumerSettings().retry_budget_seconds == 3600
    for bad in (59, 12 * 86_400 + 1):
        with pytest.raises(ValidationError, match="retry_budget_seconds"):
            ConsumerSettings(retry_budget_seconds=bad)


def _list(value):
    return value if isinstance(value, list) else [value]
