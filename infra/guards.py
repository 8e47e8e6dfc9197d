"""Synth-time guards: the reliability rules checked on the synthesized CloudFormation itself.

Constructs set the safe defaults; these guards catch the ways a stack can still get around them (a raw
`sqs.Queue`, an escape-hatch override, an event source added by hand). They read the templates, so they
judge what `cdk deploy` would actually deploy, and every finding names the construct path.

Rules:
- RELAY-VISIBILITY: a queue consumed by Lambda has VisibilityTimeout ≥ 6 × the function's Timeout;
- RELAY-MAX-RECEIVE: every redrive policy has maxReceiveCount ≥ 5;
- RELAY-SNS-AWS-SQS-KEY: a queue subscribed to SNS is not encrypted with the AWS-managed `aws/sqs` key
  (SNS cannot use that key: the topic accepts the message and the queue never receives it);
- RELAY-BATCH-FAILURES: every SQS event source mapping reports batch item failures;
- RELAY-DLQ: every queue that is not itself a dead-letter target has a DLQ;
- RELAY-S3-EXPIRY: a bucket tagged `relay:min-expiration-days` expires objects no sooner than that;
- RELAY-EXPORT-REPLACED: no stack exports a value taken from a resource CloudFormation replaces when its
  content changes (a LayerVersion, a Lambda Version): the value changes with the code, and CloudFormation
  refuses to update an export another stack imports, so the second deploy after a code change fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# The rules the constructs apply are the rules the guards check: one definition (standard library only).
from infra.constructs.defaults import MIN_MAX_RECEIVE_COUNT, VISIBILITY_FACTOR

# What CloudFormation deploys when a template leaves the property out.
SQS_DEFAULT_VISIBILITY = 30
LAMBDA_DEFAULT_TIMEOUT = 3
MIN_EXPIRATION_TAG = "relay:min-expiration-days"
_DLQ_KEYS = {"deadLetterTargetArn", "DeadLetterConfig", "DeadLetterQueue", "OnFailure"}
# Resources every content change replaces (each of their properties requires replacement, per the
# CloudFormation resource reference), so their Ref and ARNs change with the code.
REPLACED_ON_CONTENT_CHANGE = {
    "AWS::Lambda::LayerVersion": "each stack builds its own layers (RelayStack.layers) from the same asset",
    "AWS::Lambda::Version": "reference an alias, or keep the version in the stack whose resources use it",
}


@dataclass(frozen=True)
class Finding:
    rule: str
    stack: str
    logical_id: str
    path: str
    message: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.path}: {self.message}"


def referenced_ids(value: Any) -> Iterator[str]:
    """Logical ids referenced (Ref / Fn::GetAtt) anywhere inside a template value."""
    if isinstance(value, dict):
        if "Ref" in value and isinstance(value["Ref"], str):
            yield value["Ref"]
        if "Fn::GetAtt" in value:
            target = value["Fn::GetAtt"]
            yield target[0] if isinstance(target, list) else str(target).split(".")[0]
        for item in value.values():
            yield from referenced_ids(item)
    elif isinstance(value, list):
        for item in value:
            yield from referenced_ids(item)


def _dlq_targets(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key in _DLQ_KEYS:
                yield from referenced_ids(item)
            else:
                yield from _dlq_targets(item)
    elif isinstance(value, list):
        for item in value:
            yield from _dlq_targets(item)


def _single_ref(value: Any) -> str | None:
    refs = list(referenced_ids(value))
    return refs[0] if len(refs) == 1 else None


def check_template(stack: str, template: dict[str, Any]) -> list[Finding]:
    resources: dict[str, dict[str, Any]] = template.get("Resources", {})
    findings: list[Finding] = []

    def path(logical_id: str) -> str:
        meta = resources.get(logical_id, {}).get("Metadata", {})
        return str(meta.get("aws:cdk:path", f"{stack}/{logical_id}"))

    def add(rule: str, logical_id: str, message: str) -> None:
        findings.append(Finding(rule, stack, logical_id, path(logical_id), message))

    def of_type(kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
        for logical_id, resource in resources.items():
            if resource.get("Type") == kind:
                yield logical_id, resource.get("Properties", {}) or {}

    queues = dict(of_type("AWS::SQS::Queue"))
    dlq_targets = set(_dlq_targets(resources))

    for logical_id, props in queues.items():
        redrive = props.get("RedrivePolicy")
        if redrive:
            count = redrive.get("maxReceiveCount")
            if isinstance(count, int) and count < MIN_MAX_RECEIVE_COUNT:
                add(
                    "RELAY-MAX-RECEIVE",
                    logical_id,
                    f"maxReceiveCount is {count}; it must be at least {MIN_MAX_RECEIVE_COUNT} so a short "
                    "outage or a Lambda scale-up does not park healthy messages",
                )
        elif logical_id not in dlq_targets:
            add(
                "RELAY-DLQ",
                logical_id,
                "queue has no dead-letter queue (no RedrivePolicy) and is not itself a DLQ; poison messages "
                "would be retried until retention expires. Build it with ReliableQueue.",
            )

    functions = dict(of_type("AWS::Lambda::Function"))
    for logical_id, props in of_type("AWS::Lambda::EventSourceMapping"):
        queue_id = _single_ref(props.get("EventSourceArn"))
        if queue_id not in queues:
            continue
        if "ReportBatchItemFailures" not in (props.get("FunctionResponseTypes") or []):
            add(
                "RELAY-BATCH-FAILURES",
                logical_id,
                "SQS event source lacks FunctionResponseTypes [ReportBatchItemFailures]; Lambda would ignore "
                "the batchItemFailures the handler returns. Use QueueConsumer.",
            )
        function_id = _single_ref(props.get("FunctionName"))
        if function_id in functions:
            timeout = functions[function_id].get("Timeout", LAMBDA_DEFAULT_TIMEOUT)
            visibility = queues[queue_id].get("VisibilityTimeout", SQS_DEFAULT_VISIBILITY)
            if isinstance(timeout, int) and isinstance(visibility, int):
                if visibility < VISIBILITY_FACTOR * timeout:
                    add(
                        "RELAY-VISIBILITY",
                        queue_id,
                        f"visibility timeout {visibility}s is less than {VISIBILITY_FACTOR} × the timeout "
                        f"({timeout}s) of consumer {path(function_id)}; a message could reappear while it "
                        "is still being processed. Use QueueConsumer, which sets it.",
                    )

    for _subscription_id, props in of_type("AWS::SNS::Subscription"):
        if props.get("Protocol") != "sqs":
            continue
        queue_id = _single_ref(props.get("Endpoint"))
        if queue_id in queues and queues[queue_id].get("KmsMasterKeyId") in ("alias/aws/sqs", "aws/sqs"):
            add(
                "RELAY-SNS-AWS-SQS-KEY",
                queue_id,
                "queue is subscribed to SNS but encrypted with the AWS-managed aws/sqs key, which SNS cannot "
                "use: the topic would accept messages and the queue would never receive them. Use SSE-SQS "
                "(ReliableQueue's default) or a customer-managed key that grants sns.amazonaws.com.",
            )

    for logical_id, props in of_type("AWS::S3::Bucket"):
        tags = {t.get("Key"): t.get("Value") for t in props.get("Tags", []) if isinstance(t, dict)}
        if MIN_EXPIRATION_TAG not in tags:
            continue
        minimum = int(str(tags[MIN_EXPIRATION_TAG]))
        rules = (props.get("LifecycleConfiguration") or {}).get("Rules", [])
        expirations = [r.get("ExpirationInDays") for r in rules if r.get("Status", "Enabled") == "Enabled"]
        expirations = [e for e in expirations if isinstance(e, int)]
        if not expirations:
            add("RELAY-S3-EXPIRY", logical_id, f"bucket must expire objects (after ≥ {minimum} days)")
        elif min(expirations) < minimum:
            add(
                "RELAY-S3-EXPIRY",
                logical_id,
                f"objects expire after {min(expirations)} days, before queue retention + the redrive window "
                f"({minimum} days): a redriven message would find its claim check gone",
            )
    for output_id, output in (template.get("Outputs") or {}).items():
        if not isinstance(output, dict) or "Export" not in output:
            continue
        for source in set(referenced_ids(output.get("Value"))):
            kind = resources.get(source, {}).get("Type")
            if kind in REPLACED_ON_CONTENT_CHANGE:
                add(
                    "RELAY-EXPORT-REPLACED",
                    source,
                    f"output {output_id} exports a value of this {kind}, which CloudFormation replaces "
                    "whenever its content changes: the exported value would change on the next code change, "
                    "and CloudFormation refuses to update an export another stack imports (the second "
                    f"deploy fails). Fix: {REPLACED_ON_CONTENT_CHANGE[kind]}.",
                )
    return findings


def check_templates(templates: dict[str, dict[str, Any]]) -> list[Finding]:
    return [f for stack, template in templates.items() for f in check_template(stack, template)]
