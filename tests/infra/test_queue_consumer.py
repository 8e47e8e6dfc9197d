from __future__ import annotations

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
    layer_exports = " ".join(str(layer) for layer in worker["Layers"])
    assert "DependencyLayer" in layer_exports and "KernelLayer" in layer_exports


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
    assert "sqs:SendMessage" not in by_resource[queue_id]
    assert by_resource[dlq_id] == {"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}
    # No AWS-managed policy: logs go only to the function's own log group.
    role = synthesized.json["Resources"][role_id]["Properties"]
    assert "ManagedPolicyArns" not in role


def _list(value):
    return value if isinstance(value, list) else [value]
