from __future__ import annotations


def _alarms_on(s, metric, dimension_value_ref):
    return [
        a["Properties"]
        for a in s.resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"]["MetricName"] == metric
        and any(d["Value"] == dimension_value_ref for d in a["Properties"].get("Dimensions", []))
    ]


def test_every_dlq_alarms_when_not_empty(synthesized):
    dlqs = [
        k
        for k, v in synthesized.resources("AWS::SQS::Queue").items()
        if "RedrivePolicy" not in v["Properties"]
    ]
    assert len(dlqs) == 6  # work, ordered, audit DLQs + undeliverable + schedule + target
    for dlq_id in dlqs:
        (alarm,) = _alarms_on(
            synthesized, "ApproximateNumberOfMessagesVisible", {"Fn::GetAtt": [dlq_id, "QueueName"]}
        )
        assert alarm["Threshold"] == 0
        assert alarm["ComparisonOperator"] == "GreaterThanThreshold"


def test_every_reliable_queue_alarms_on_oldest_message_age(synthesized):
    threshold = synthesized.stack.config.queues.oldest_message_alarm_seconds
    for path in ("Work/Queue/Resource", "Ordered/Queue/Resource", "Audit/Queue/Resource"):
        queue_id = synthesized.logical_id(path)
        (alarm,) = _alarms_on(
            synthesized, "ApproximateAgeOfOldestMessage", {"Fn::GetAtt": [queue_id, "QueueName"]}
        )
        assert alarm["Threshold"] == threshold


def test_every_consumer_alarms_on_errors(synthesized):
    fn_id = synthesized.logical_id("Worker/Function/Resource")
    (alarm,) = _alarms_on(synthesized, "Errors", {"Ref": fn_id})
    assert alarm["Namespace"] == "AWS/Lambda"


def test_api_destination_rule_alarms_on_failures_and_dlq(synthesized):
    # by the rule's plain name, as EventBridge reports it on a custom bus (its Ref there is "bus|name")
    rule_id = synthesized.logical_id("Hourly/Rule/Resource")
    name = synthesized.resources("AWS::Events::Rule")[rule_id]["Properties"]["Name"]
    for metric in ("FailedInvocations", "InvocationsSentToDlq"):
        (alarm,) = _alarms_on(synthesized, metric, name)
        assert {d["Name"] for d in alarm["Dimensions"]} == {"EventBusName", "RuleName"}


def test_every_alarm_notifies_the_alarm_topic(synthesized):
    alarms = synthesized.resources("AWS::CloudWatch::Alarm")
    assert alarms
    for alarm in alarms.values():
        actions = alarm["Properties"]["AlarmActions"]
        assert len(actions) == 1 and "AlarmTopic" in str(actions[0])


def test_one_dashboard_per_service_stack(synthesized):
    assert len(synthesized.resources("AWS::CloudWatch::Dashboard")) == 1
