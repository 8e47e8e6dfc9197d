"""Infra assertions for the reports and scores stacks (issue 6)."""

from __future__ import annotations

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
def reports(app_templates: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return app_templates["relay-dev-reports"]


@pytest.fixture(scope="module")
def scores(app_templates: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return app_templates["relay-dev-scores"]


def test_report_events_fan_out_to_the_verifier_and_notification_queues(reports):
    topic_id = _id(reports, "ReportEvents/Topic/Resource")
    subs = _of(reports, "AWS::SNS::Subscription").values()
    endpoints = {s["Endpoint"]["Fn::GetAtt"][0] for s in subs if s["TopicArn"] == {"Ref": topic_id}}
    assert endpoints == {
        _id(reports, "VerifierQueue/Queue/Resource"),
        _id(reports, "NotificationQueue/Queue/Resource"),
    }
    for sub in subs:
        assert sub["FilterPolicy"] == {"eventType": ["ReportGenerated"]}


def test_verification_mismatches_are_alarmed(reports):
    (alarm,) = [
        a
        for a in _of(reports, "AWS::CloudWatch::Alarm").values()
        if a["MetricName"] == "VerificationMismatch"
    ]
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "reports"}]
    assert alarm["Threshold"] == 0


def test_schedule_fires_at_minute_0_every_hour_in_the_configured_zone_with_retries_and_dlq(scores):
    (schedule,) = _of(scores, "AWS::Scheduler::Schedule").values()
    assert schedule["ScheduleExpression"] == "cron(0 * * * ? *)"
    assert schedule["ScheduleExpressionTimezone"] == "UTC"
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
    target = schedule["Target"]
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 10, "MaximumEventAgeInSeconds": 7200}
    dlq_id = _id(scores, "HourlySnapshot/ScheduleDlq/Resource")
    assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [dlq_id, "Arn"]}}
    params = target["EventBridgeParameters"]
    assert params == {"DetailType": "ScoreSnapshotDue", "Source": "relay.scores"}
    assert "<aws.scheduler.scheduled-time>" in target["Input"]


def test_rule_calls_the_scores_api_destination_with_retry_policy_max_age_and_dlq(scores):
    (rule,) = _of(scores, "AWS::Events::Rule").values()
    assert rule["EventPattern"] == {"source": ["relay.scores"], "detail-type": ["ScoreSnapshotDue"]}
    (target,) = rule["Targets"]
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 10, "MaximumEventAgeInSeconds": 7200}
    dlq_id = _id(scores, "HourlySnapshot/TargetDlq/Resource")
    assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [dlq_id, "Arn"]}}
    (destination,) = _of(scores, "AWS::Events::ApiDestination").values()
    assert destination["HttpMethod"] == "POST"
    api_id = _id(scores, "Http/Api/Resource")
    endpoint = str(destination["InvocationEndpoint"])
    assert api_id in endpoint and endpoint.endswith("/score-snapshots']]}")


def test_connection_sends_the_api_key_from_the_secrets_manager_secret(scores):
    (connection,) = _of(scores, "AWS::Events::Connection").values()
    params = connection["AuthParameters"]["ApiKeyAuthParameters"]
    assert params["ApiKeyName"] == "x-api-key"
    secret_id = _id(scores, "SnapshotApiKey/Resource")
    assert "resolve:secretsmanager" in str(params["ApiKeyValue"]) and secret_id in str(params["ApiKeyValue"])


def test_score_snapshots_route_uses_the_api_key_lambda_authorizer_and_reads_need_iam(scores):
    routes = {r["RouteKey"]: r for r in _of(scores, "AWS::ApiGatewayV2::Route").values()}
    assert set(routes) == {"POST /score-snapshots", "GET /agents/{agentId}/scores"}
    post = routes["POST /score-snapshots"]
    assert post["AuthorizationType"] == "CUSTOM"
    (authorizer,) = _of(scores, "AWS::ApiGatewayV2::Authorizer").values()
    assert post["AuthorizerId"] == {"Ref": next(iter(_authorizer_ids(scores)))}
    assert authorizer["AuthorizerType"] == "REQUEST"
    assert authorizer["IdentitySource"] == ["$request.header.x-api-key"]
    assert authorizer["EnableSimpleResponses"] is True
    assert routes["GET /agents/{agentId}/scores"]["AuthorizationType"] == "AWS_IAM"


def _authorizer_ids(template):
    return [k for k, v in template["Resources"].items() if v["Type"] == "AWS::ApiGatewayV2::Authorizer"]


def test_only_the_authorizer_reads_the_api_key_secret(scores):
    secret_id = _id(scores, "SnapshotApiKey/Resource")
    readers = [
        role["Ref"]
        for policy in _of(scores, "AWS::IAM::Policy").values()
        for statement in policy["PolicyDocument"]["Statement"]
        if "secretsmanager:GetSecretValue" in statement["Action"]
        and statement["Resource"] == {"Ref": secret_id}
        for role in policy["Roles"]
    ]
    assert readers == [_id(scores, "Authorizer/Role/Resource")]


def test_api_destination_failures_and_both_dlqs_are_alarmed(scores):
    alarms = list(_of(scores, "AWS::CloudWatch::Alarm").values())
    metrics = {a["MetricName"] for a in alarms}
    assert {"FailedInvocations", "InvocationsSentToDlq"} <= metrics
    for dlq in ("HourlySnapshot/ScheduleDlq/Resource", "HourlySnapshot/TargetDlq/Resource"):
        dlq_id = _id(scores, dlq)
        assert any(
            a["MetricName"] == "ApproximateNumberOfMessagesVisible"
            and a["Dimensions"][0]["Value"] == {"Fn::GetAtt": [dlq_id, "QueueName"]}
            for a in alarms
        )


def test_verifier_retries_outlast_the_maximum_age_before_redrive(reports, app_templates):
    from infra.stacks.reports import VERIFIER_BACKOFF_BASE_SECONDS

    queue = reports["Resources"][_id(reports, "VerifierQueue/Queue/Resource")]["Properties"]
    receives = queue["RedrivePolicy"]["maxReceiveCount"]
    (verifier,) = [
        f
        for f in _of(reports, "AWS::Lambda::Function").values()
        if f["Handler"] == "reports.handlers.verifier.handler"
    ]
    env = verifier["Environment"]["Variables"]
    assert int(env["RELAY_BACKOFF_BASE_SECONDS"]) == VERIFIER_BACKOFF_BASE_SECONDS
    # The kernel's backoff without jitter: min(base · 2^(n−1), 900) before receive n+1.
    waited = sum(min(VERIFIER_BACKOFF_BASE_SECONDS * 2 ** (n - 1), 900) for n in range(1, receives))
    assert waited > int(env["VERIFY_MAX_AGE_SECONDS"])
