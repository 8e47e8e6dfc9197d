from __future__ import annotations


def _one(s, kind):
    (props,) = [v["Properties"] for v in s.resources(kind).values()]
    return props


def test_schedule_puts_an_event_on_the_app_bus_at_minute_0_with_retry_policy_and_dlq(synthesized):
    schedule = _one(synthesized, "AWS::Scheduler::Schedule")
    assert schedule["ScheduleExpression"] == "cron(0 * * * ? *)"
    assert schedule["ScheduleExpressionTimezone"] == "Etc/UTC"
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
    target = schedule["Target"]
    assert "EventBridgeParameters" in target
    assert target["EventBridgeParameters"]["DetailType"] == "ScoreSnapshotDue"
    assert target["RetryPolicy"]["MaximumRetryAttempts"] == 10
    assert target["RetryPolicy"]["MaximumEventAgeInSeconds"] == 7200
    dlq_id = synthesized.logical_id("Hourly/ScheduleDlq/Resource")
    assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [dlq_id, "Arn"]}}
    assert "relay-dev" in str(target["Arn"])  # the app's bus, imported from core


def test_rule_targets_the_api_destination_with_retry_policy_max_age_and_dlq(synthesized):
    rule = _one(synthesized, "AWS::Events::Rule")
    assert rule["EventPattern"] == {"source": ["relay.test"], "detail-type": ["ScoreSnapshotDue"]}
    (target,) = rule["Targets"]
    destination_id = synthesized.logical_id("Hourly/Destination/ApiDestination")
    assert target["Arn"] == {"Fn::GetAtt": [destination_id, "Arn"]}
    assert target["InputPath"] == "$.detail"
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 10, "MaximumEventAgeInSeconds": 7200}
    dlq_id = synthesized.logical_id("Hourly/TargetDlq/Resource")
    assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [dlq_id, "Arn"]}}
    destination = _one(synthesized, "AWS::Events::ApiDestination")
    assert destination["HttpMethod"] == "POST"
    assert destination["InvocationEndpoint"] == "https://example.com/score-snapshots"
    assert destination["InvocationRateLimitPerSecond"] == 1


def test_target_dlq_policy_admits_events_only_from_this_rule(synthesized):
    dlq_id = synthesized.logical_id("Hourly/TargetDlq/Resource")
    rule_id = synthesized.logical_id("Hourly/Rule/Resource")
    allows = [
        s
        for p in synthesized.resources("AWS::SQS::QueuePolicy").values()
        if {"Ref": dlq_id} in p["Properties"]["Queues"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s["Effect"] == "Allow"
    ]
    (allow,) = allows
    assert allow["Principal"] == {"Service": "events.amazonaws.com"}
    assert allow["Condition"] == {"ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": [rule_id, "Arn"]}}}


def test_connection_uses_an_api_key_from_secrets_manager(synthesized):
    connection = _one(synthesized, "AWS::Events::Connection")
    assert connection["AuthorizationType"] == "API_KEY"
    params = connection["AuthParameters"]["ApiKeyAuthParameters"]
    assert params["ApiKeyName"] == "x-api-key"
    value = str(params["ApiKeyValue"])
    assert "resolve:secretsmanager" in value
    secret_id = synthesized.logical_id("ApiKey/Resource")
    assert secret_id in value
