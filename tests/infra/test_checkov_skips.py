"""The reasons behind the checks `.checkov.yaml` skips for the whole app, pinned on the synthesized templates.

A skip is only as good as its reason: where the reason is a fact about the templates (no function is
invoked asynchronously, concurrency is capped elsewhere, no secret sits in an environment variable, only
access-log buckets lack access logs), the test here fails when a change makes it untrue, so the skip is
revisited instead of silently hiding a real finding.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKOV_CONFIG = ROOT / ".checkov.yaml"
SECRET_LOOKING = re.compile(r"SECRET|PASSWORD|TOKEN|API_KEY|PRIVATE", re.IGNORECASE)


@pytest.fixture(scope="module")
def templates(app_templates: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return app_templates


def _of(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v.get("Properties", {}) for k, v in template["Resources"].items() if v["Type"] == kind}


def _refs(value: Any) -> set[str]:
    """Logical ids referenced (Ref / Fn::GetAtt) anywhere inside a template value."""
    found: set[str] = set()
    if isinstance(value, dict):
        if isinstance(value.get("Ref"), str):
            found.add(value["Ref"])
        if isinstance(value.get("Fn::GetAtt"), list):
            found.add(value["Fn::GetAtt"][0])
        for item in value.values():
            found |= _refs(item)
    elif isinstance(value, list):
        for item in value:
            found |= _refs(item)
    return found


def _invokers(template: dict[str, Any]) -> dict[str, set[str]]:
    """For each Lambda function: what invokes it ("sqs", "stream", "http-api")."""
    functions = _of(template, "AWS::Lambda::Function")
    queues = _of(template, "AWS::SQS::Queue")
    invokers: dict[str, set[str]] = {f: set() for f in functions}
    for mapping in _of(template, "AWS::Lambda::EventSourceMapping").values():
        kind = "sqs" if _refs(mapping["EventSourceArn"]) & set(queues) else "stream"
        for function in _refs(mapping["FunctionName"]) & set(functions):
            invokers[function].add(kind)
    for kind in ("AWS::ApiGatewayV2::Integration", "AWS::ApiGatewayV2::Authorizer"):
        for props in _of(template, kind).values():
            uri = props.get("IntegrationUri", props.get("AuthorizerUri"))
            for function in _refs(uri) & set(functions):
                invokers[function].add("http-api")
    return invokers


def test_no_function_is_invoked_asynchronously(templates):
    """CKV_AWS_116: a function's DeadLetterConfig only receives failed asynchronous invocations."""
    for name, template in templates.items():
        for function, invoked_by in _invokers(template).items():
            assert invoked_by, f"{name}/{function} has no SQS, stream or HTTP API invoker; if it is now "
            "invoked asynchronously (SNS, EventBridge, S3, Scheduler), give it an on-failure destination "
            "and remove CKV_AWS_116 from .checkov.yaml"
        for permission_id, permission in _of(template, "AWS::Lambda::Permission").items():
            # API Gateway invokes synchronously; SNS, EventBridge, S3 ... would invoke asynchronously.
            assert permission["Principal"] == "apigateway.amazonaws.com", f"{name}/{permission_id}"
        for policy_id, policy in _of(template, "AWS::IAM::Policy").items():
            # Scheduler, Pipes and Step Functions invoke through a role, not a function permission.
            actions = json.dumps(policy["PolicyDocument"])
            assert "lambda:Invoke" not in actions and '"lambda:*"' not in actions, f"{name}/{policy_id}"


def test_concurrency_is_capped_by_event_sources_and_throttling(templates):
    """CKV_AWS_115: MaximumConcurrency and API throttling instead of reserved concurrency."""
    for name, template in templates.items():
        for mapping_id, mapping in _of(template, "AWS::Lambda::EventSourceMapping").items():
            if _refs(mapping["EventSourceArn"]) & set(_of(template, "AWS::SQS::Queue")):
                assert mapping.get("ScalingConfig", {}).get("MaximumConcurrency"), f"{name}/{mapping_id}"
            else:
                assert mapping.get("ParallelizationFactor"), f"{name}/{mapping_id}"
        stages = _of(template, "AWS::ApiGatewayV2::Stage").values()
        for stage in stages:
            settings = stage.get("DefaultRouteSettings", {})
            assert settings.get("ThrottlingRateLimit") and settings.get("ThrottlingBurstLimit"), name
        for function, invoked_by in _invokers(template).items():
            assert "http-api" not in invoked_by or stages, f"{name}/{function}: HTTP API without a stage"
            props = template["Resources"][function]["Properties"]
            # Reserving concurrency fails the deploy on accounts with a low concurrency quota, and a
            # throttled SQS batch counts towards maxReceiveCount (healthy messages parked).
            assert "ReservedConcurrentExecutions" not in props, f"{name}/{function}"


def test_no_lambda_environment_variable_holds_a_secret(templates):
    """CKV_AWS_173: environment variables carry names, URLs and ARNs; secrets are read at run time."""
    for name, template in templates.items():
        for function, props in _of(template, "AWS::Lambda::Function").items():
            variables = props.get("Environment", {}).get("Variables", {})
            for key, value in variables.items():
                assert "{{resolve:" not in json.dumps(value), f"{name}/{function}: {key} resolves a secret"
                if SECRET_LOOKING.search(key):
                    assert key.endswith(("_ARN", "_NAME")), f"{name}/{function}: {key} looks like a secret"


def test_only_access_log_buckets_lack_access_logging(templates):
    """CKV_AWS_18: an access-log bucket cannot log to itself; every other bucket logs to one."""
    for name, template in templates.items():
        buckets = _of(template, "AWS::S3::Bucket")
        log_targets = {
            target
            for props in buckets.values()
            for target in _refs(props.get("LoggingConfiguration", {}).get("DestinationBucketName"))
        }
        for bucket_id, props in buckets.items():
            if "LoggingConfiguration" not in props:
                assert bucket_id in log_targets, f"{name}/{bucket_id} has no access logs and is no log bucket"


def test_every_checkov_skip_has_a_reason_and_its_pinning_tests_exist():
    lines = CHECKOV_CONFIG.read_text().splitlines()
    start = lines.index("skip-check:")
    skipped = []
    for i, line in enumerate(lines[start + 1 :], start + 1):
        match = re.match(r"^  - (CKV\w+)\s*$", line)
        if match:
            assert lines[i - 1].lstrip().startswith("#"), f"{match[1]} is skipped without a reason above it"
            skipped.append(match[1])
    assert skipped and len(skipped) == len(set(skipped)), skipped
    for file, test in re.findall(r"(test_\w+\.py)::(test_\w+)", CHECKOV_CONFIG.read_text()):
        assert f"def {test}(" in (Path(__file__).parent / file).read_text(), f"{file}::{test} is gone"
