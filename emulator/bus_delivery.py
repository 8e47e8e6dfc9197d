"""Event bus → rule → SQS queue, inside the emulator process, the way EventBridge does it.

moto matches a PutEvents entry against the bus's rules and sends it to an SQS target itself, but with
its own pattern matcher and without asking the queue's policy. This replaces that step
(``moto.events.models.Rule.send_to_targets``) for every event put on a bus, by a function or by the
sandbox's Scheduler hop:

* **matching** is ``emulator.event_patterns`` (EventBridge's content filters: prefix, suffix,
  anything-but, numeric, exists, cidr, wildcard, ``$or``...), on the event as EventBridge builds it;
* **delivery to an SQS target** is allowed only if the queue's policy lets ``events.amazonaws.com``
  send for this rule (``aws:SourceArn``), as on AWS; the message body is the event as AWS delivers it
  (``time`` in ISO-8601, no ``ingestion-time``);
* an event the target refuses (the policy denies it, the queue is gone) goes to the target's DLQ, if
  that queue's policy admits the rule, with the message attributes EventBridge documents (RULE_ARN,
  TARGET_ARN, ERROR_CODE, ERROR_MESSAGE, EXHAUSTED_RETRY_CONDITION, RETRY_ATTEMPTS); without a DLQ it is
  dropped and counted. Locally such a refusal is not retried: the emulator's queues never fail
  transiently, and a policy or a deleted queue does not heal within a retry window;
* **API-destination targets** are left to the sandbox's EventBridge glue (``emulator.eventbridge``), which
  calls them over HTTP with the connection's key; other target types are counted as unsupported.

``delivered()`` (the control route ``/_relay/bus``) reports what happened, per rule.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from emulator import iam_enforcer
from emulator.event_patterns import InvalidPattern, pattern_matches
from emulator.tallies import clear_rules, delivered, rule_outcome


def _iso(value: Any) -> str:
    if isinstance(value, int | float):
        return datetime.fromtimestamp(float(value), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(value)


def aws_event(moto_event: dict[str, Any]) -> dict[str, Any]:
    """The event as EventBridge delivers it to a target."""
    event = {k: v for k, v in moto_event.items() if k != "ingestion-time"}
    if "time" in event:
        event["time"] = _iso(event["time"])
    return event


def _queue(arn: str) -> tuple[Any, str]:
    from moto.sqs.models import sqs_backends

    _, _, _, region, account, name = arn.split(":", 5)
    return sqs_backends[account][region], name


def _send(queue_arn: str, body: str, attributes: dict[str, str] | None = None) -> None:
    backend, name = _queue(queue_arn)
    message_attributes = (
        {k: {"DataType": "String", "StringValue": v or "-"} for k, v in attributes.items()}
        if attributes
        else None
    )
    backend.send_message(queue_name=name, message_body=body, message_attributes=message_attributes)


def _deliver_to_queue(rule: Any, target: dict[str, Any], event: dict[str, Any]) -> None:
    state = iam_enforcer.STATE
    queue_arn = str(target["Arn"])
    body = json.dumps(event, separators=(",", ":"))
    error_code, error_message = "", ""
    if not iam_enforcer.service_may(state, "events.amazonaws.com", rule.arn, "sqs:SendMessage", queue_arn):
        error_code = "AccessDenied"
        error_message = f"the policy of {queue_arn} does not let events.amazonaws.com send for {rule.arn}"
    else:
        try:
            params = target.get("SqsParameters") or {}
            if params.get("MessageGroupId"):
                backend, name = _queue(queue_arn)
                backend.send_message(queue_name=name, message_body=body, group_id=params["MessageGroupId"])
            else:
                _send(queue_arn, body)
            rule_outcome(rule.name, "delivered")
            delivered("events", rule.arn)
            return
        except Exception as exc:  # the queue is gone, or refused the message
            error_code = getattr(exc, "code", None) or type(exc).__name__
            error_message = str(exc)[:1000]
    dlq = (target.get("DeadLetterConfig") or {}).get("Arn")
    if dlq and iam_enforcer.service_may(state, "events.amazonaws.com", rule.arn, "sqs:SendMessage", dlq):
        try:
            _send(
                str(dlq),
                body,
                {
                    "RULE_ARN": rule.arn,
                    "TARGET_ARN": queue_arn,
                    "ERROR_CODE": str(error_code),
                    "ERROR_MESSAGE": error_message,
                    "EXHAUSTED_RETRY_CONDITION": "NonRetryableError",
                    "RETRY_ATTEMPTS": "0",
                },
            )
            rule_outcome(rule.name, "dead-lettered")
            return
        except Exception as exc:  # the DLQ is gone too: nothing more EventBridge could do
            rule_outcome(rule.name, f"dropped ({type(exc).__name__})")
            return
    rule_outcome(rule.name, "dropped")


def _send_to_targets(original: Callable[..., Any]) -> Callable[..., Any]:
    def send_to_targets(self: Any, original_event: dict[str, Any], transform_input: bool = True) -> None:
        event = aws_event(original_event)
        try:
            pattern = self.event_pattern.get_pattern()
            if pattern and not pattern_matches(pattern, event):
                return
        except InvalidPattern:
            rule_outcome(self.name, "invalid-pattern")
            return
        rule_outcome(self.name, "matched")
        for target in self.targets:
            arn = str(target.get("Arn", ""))
            if arn.startswith("arn:aws:sqs:"):
                _deliver_to_queue(self, target, event)
            elif ":api-destination/" in arn:
                continue  # emulator.eventbridge calls API destinations (it holds the connections' keys)
            else:
                rule_outcome(self.name, "unsupported-target")

    send_to_targets.__wrapped__ = original  # type: ignore[attr-defined]
    return send_to_targets


def install() -> Callable[[], None]:
    """Route every bus event through this module; returns a function that undoes it."""
    from moto.events.models import Rule

    original = Rule.send_to_targets
    Rule.send_to_targets = _send_to_targets(original)  # type: ignore[method-assign]

    def remove() -> None:
        Rule.send_to_targets = original  # type: ignore[method-assign]
        clear_rules()

    return remove
