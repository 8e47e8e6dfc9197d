"""``python -m ops doctor``: the SNS → SQS → Lambda checklist, for every subscription and consumer.

Each check is PASS or FAIL with what was found and, on FAIL, the fix; any FAIL makes the exit code 1.
Last, ``data layout``: how many items of an older layout ``ops migrate`` would still rewrite (a scan
of each table it migrates), each a FAIL until it is 0.

The checks are the failure modes the constructs and the synth guards exist to prevent
(``infra/guards.py``), verified on what is deployed, where drift or a hand edit shows:

per subscription of the stage's topics
- confirmed (not ``PendingConfirmation``): unconfirmed, SNS delivers nothing;
per SNS-subscribed queue
- its policy admits only its topic(s): an Allow for ``sns.amazonaws.com`` conditioned on
  ``aws:SourceArn`` = the topic; none, and SNS's deliveries are refused (they go to the topic's
  undeliverable DLQ); unconditioned, and any topic can inject;
- raw delivery as the consumer expects: the service's ``functions/<service>/subscriptions.py``
  (standard library only) says ``<QUEUE>_RAW_DELIVERY`` for one queue or ``RAW_DELIVERY`` for all of the
  service's, else enveloped (``FanoutTopic.subscribe``'s default): payments and reports enveloped,
  orders' archive goes to Firehose, not a queue;
- not encrypted with ``alias/aws/sqs``: SNS cannot use an AWS-managed SQS key, and every delivery fails;
- the subscription has its undeliverable DLQ;
per queue a function consumes (an SQS event source mapping)
- visibility timeout >= 6 × the function's timeout (else a slow batch is delivered twice in parallel);
- a DLQ exists, with maxReceiveCount >= 5;
- the mapping is enabled, and reports batch item failures (else one bad record retries the batch);
- an alarm watches the DLQ (``ApproximateNumberOfMessagesVisible`` on it);
per other queue (not a DLQ)
- something consumes it.

In the sandbox, functions, mappings, alarms and queue policies are read from cdk.out (see
``ops.app``): those checks then say "declared", and what they verify is the templates the sandbox
provisioned and enforces.
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib.util
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ops.app import (
    DECLARED,
    ROOT,
    AlarmInfo,
    App,
    FunctionInfo,
    MappingInfo,
    QueueInfo,
    SubscriptionInfo,
    add_connection_arguments,
    connect,
)

MIN_MAX_RECEIVE_COUNT = 5
VISIBILITY_FACTOR = 6
FUNCTIONS = ROOT / "functions"


@dataclass(frozen=True)
class Check:
    subject: str  # the queue (or subscription) the check is about, short name
    name: str
    ok: bool
    detail: str  # what was found
    fix: str = ""  # what to do, when it fails

    def to_json(self) -> dict[str, Any]:
        return {
            "subject": self.subject,
            "check": self.name,
            "ok": self.ok,
            "detail": self.detail,
            "fix": "" if self.ok else self.fix,
        }


# -- what the consumer expects ----------------------------------------------------------------------


def raw_delivery_expected(service: str, queue_short: str, functions: Path = FUNCTIONS) -> tuple[bool, str]:
    """Whether the subscription of ``queue_short`` (its name within the service: ``analytics``) is meant
    to be raw, and which constant says so."""
    path = functions / service / "subscriptions.py"
    constant = f"{queue_short.removesuffix('.fifo').upper().replace('-', '_')}_RAW_DELIVERY"
    module = _load(path)
    where = f"functions/{service}/subscriptions.py"
    if module is not None:
        if isinstance(getattr(module, constant, None), bool):
            return bool(getattr(module, constant)), f"{where} {constant}"
        if isinstance(getattr(module, "RAW_DELIVERY", None), bool):
            return bool(module.RAW_DELIVERY), f"{where} RAW_DELIVERY"
    return False, "FanoutTopic.subscribe's default (enveloped)"


def _load(path: Path) -> Any:
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location(f"_ops_doctor_{path.parent.name}_subscriptions", path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # standard library only, by the modules' own contract
    return module


# -- the policy --------------------------------------------------------------------------------------


def sns_source_arns(policy: Mapping[str, Any]) -> tuple[set[str], list[str]]:
    """The topics a queue policy lets SNS send from (``aws:SourceArn`` values), and the problems: an
    Allow that lets SNS (or anyone) send without an ``aws:SourceArn`` condition."""
    allowed: set[str] = set()
    problems: list[str] = []
    statements = policy.get("Statement", [])
    for i, statement in enumerate(statements if isinstance(statements, list) else [statements]):
        if statement.get("Effect") != "Allow" or not _sends(statement.get("Action")):
            continue
        if not _principal_may_be_sns(statement.get("Principal")):
            continue
        arns = _source_arn_condition(statement.get("Condition") or {})
        label = statement.get("Sid") or f"statement {i + 1}"
        if not arns:
            problems.append(
                f"{label} lets {_principal_text(statement.get('Principal'))} send without an "
                "aws:SourceArn condition"
            )
        allowed |= arns
    return allowed, problems


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _sends(action: Any) -> bool:
    return any(fnmatch.fnmatch("sqs:sendmessage", str(a).lower()) for a in _as_list(action))


def _principal_may_be_sns(principal: Any) -> bool:
    if principal == "*":
        return True
    if isinstance(principal, dict):
        services = [str(s) for s in _as_list(principal.get("Service"))]
        anyone = "*" in [str(a) for a in _as_list(principal.get("AWS"))]
        return anyone or "sns.amazonaws.com" in services
    return False


def _principal_text(principal: Any) -> str:
    return "anyone" if principal == "*" or "*" in json.dumps(principal) else "sns.amazonaws.com"


def _source_arn_condition(condition: Mapping[str, Any]) -> set[str]:
    arns: set[str] = set()
    for operator, values in condition.items():
        if operator.removeprefix("ForAnyValue:").removeprefix("ForAllValues:") not in (
            "ArnEquals",
            "ArnLike",
            "StringEquals",
            "StringLike",
        ):
            continue
        for key, value in (values or {}).items():
            if key.lower() == "aws:sourcearn":
                arns |= {str(v) for v in _as_list(value)}
    return arns


# -- the checks ----------------------------------------------------------------------------------------


class Doctor:
    def __init__(self, app: App, *, service: str | None = None) -> None:
        self.app = app
        self.service = service
        self.queues = app.queues()
        self.by_arn = {q.arn: q for q in self.queues}
        self.subscriptions = app.subscriptions()
        self.functions: dict[str, FunctionInfo] = app.functions_by_name()
        self.mappings = app.event_source_mappings()
        self.alarms: list[AlarmInfo] = app.alarms()

    def run(self) -> list[Check]:
        checks: list[Check] = []
        for subscription in self.subscriptions:
            if subscription.protocol != "sqs":
                if self._wanted(subscription.topic.service):
                    checks.append(self._confirmed(subscription, subscription.topic.short))
        for queue in self.queues:
            if queue.is_dlq or not self._wanted(queue.service):
                continue
            subs = [s for s in self.subscriptions if s.protocol == "sqs" and s.endpoint == queue.arn]
            mappings = [m for m in self.mappings if m.is_sqs and m.source_arn == queue.arn]
            for subscription in subs:
                checks.append(self._confirmed(subscription, queue.short))
                checks.append(self._raw_delivery(queue, subscription))
                checks.append(self._subscription_dlq(queue, subscription))
            if subs:
                checks.append(self._policy(queue, subs))
                checks.append(self._kms(queue))
            if not mappings:
                checks.append(
                    Check(
                        queue.short,
                        "consumed by a function",
                        False,
                        "no event source mapping reads it",
                        "deploy its QueueConsumer (or remove the queue): its messages only age",
                    )
                )
            for mapping in mappings:
                checks.extend(self._consumer(queue, mapping))
        # Subscriptions whose queue is not among the stage's (deleted, or another stage's).
        known = {q.arn for q in self.queues}
        for subscription in self.subscriptions:
            if subscription.protocol == "sqs" and subscription.endpoint not in known:
                if self._wanted(subscription.topic.service):
                    checks.append(
                        Check(
                            subscription.topic.short,
                            f"subscription's queue exists ({subscription.endpoint})",
                            False,
                            "the queue is not one of the stage's queues (deleted?)",
                            "redeploy the stack that owns it, or unsubscribe: SNS is sending to nowhere",
                        )
                    )
        checks.extend(self._layouts())
        return checks

    def _layouts(self) -> list[Check]:
        """How many items of an older data layout each ``ops migrate`` pass would still rewrite: the
        release without the older layout's readers may be deployed only when every count is 0."""
        from ops.migrate import older_items, passes

        services = {p.name: p.service for p in passes()}
        rewrite = f"python -m ops migrate --stage {self.app.stage} --reason '…' (docs/deployment.md)"
        return [
            Check(
                "data layout",
                f"{name}: none left",
                count == 0,
                f"{count} left",
                rewrite,
            )
            for name, count in older_items(self.app).items()
            if self._wanted(services[name])
        ]

    def _wanted(self, service: str) -> bool:
        return self.service is None or service == self.service

    # subscription checks -----------------------------------------------------------------------

    def _confirmed(self, subscription: SubscriptionInfo, subject: str) -> Check:
        name = f"subscription to {subscription.topic.short} confirmed"
        if not subscription.pending:
            return Check(subject, name, True, f"{subscription.protocol} subscription confirmed")
        fix = (
            "confirm it: an SQS subscription in another account needs the queue owner to confirm; "
            "otherwise delete it and redeploy the stack (SNS confirms same-account SQS at once)"
            if subscription.protocol == "sqs"
            else f"confirm the {subscription.protocol} subscription ({subscription.endpoint}) from the "
            "message SNS sent it; until then nothing is delivered there"
        )
        return Check(subject, name, False, "PendingConfirmation: SNS delivers nothing to it", fix)

    def _raw_delivery(self, queue: QueueInfo, subscription: SubscriptionInfo) -> Check:
        within = queue.short.split("-", 1)[-1]
        expected, why = raw_delivery_expected(queue.service, within)

        def mode(raw: bool) -> str:
            return "raw" if raw else "enveloped"

        ok = subscription.raw_delivery == expected
        detail = f"{mode(subscription.raw_delivery)}; the consumer expects {mode(expected)} ({why})"
        fix = (
            f"aws sns set-subscription-attributes --subscription-arn {subscription.arn} --attribute-name "
            f"RawMessageDelivery --attribute-value {str(expected).lower()} (the stack says so: this is drift)"
        )
        return Check(
            queue.short, f"raw delivery from {subscription.topic.short}", ok, detail, "" if ok else fix
        )

    def _subscription_dlq(self, queue: QueueInfo, subscription: SubscriptionInfo) -> Check:
        name = f"undeliverable DLQ of the {subscription.topic.short} subscription"
        arn = subscription.dlq_arn
        if arn and arn in self.by_arn:
            return Check(queue.short, name, True, self.by_arn[arn].short)
        detail = f"its DLQ {arn.rsplit(':', 1)[-1]} does not exist" if arn else "no RedrivePolicy"
        return Check(
            queue.short,
            name,
            False,
            f"{detail}: what SNS cannot deliver is dropped after its retries",
            "redeploy: FanoutTopic.subscribe gives every subscription the topic's undeliverable DLQ",
        )

    def _policy(self, queue: QueueInfo, subscriptions: Sequence[SubscriptionInfo]) -> Check:
        topics = {s.topic.arn for s in subscriptions}
        names = ", ".join(sorted(s.topic.short for s in subscriptions))
        name = f"queue policy admits only {names}"
        policy, where = self.app.queue_policy(queue)
        declared = (
            " (declared in cdk.out: the sandbox enforces it, it is not set on the queue)"
            if where == DECLARED
            else ""
        )
        fix = (
            "redeploy the stack (FanoutTopic.subscribe writes the statement: Allow sns.amazonaws.com "
            "sqs:SendMessage when aws:SourceArn = the topic), or fix the policy: aws sqs "
            f"set-queue-attributes --queue-url {queue.url} --attributes Policy=…"
        )
        if policy is None:
            return Check(
                queue.short,
                name,
                False,
                "no queue policy: SNS's deliveries are refused (they end in the undeliverable DLQ)",
                fix,
            )
        allowed, problems = sns_source_arns(policy)
        missing = sorted(t.rsplit(":", 1)[-1] for t in topics if not any(_arn_match(a, t) for a in allowed))
        extra = sorted(a for a in allowed if a not in topics)
        if missing:
            problems.append(f"does not admit {', '.join(missing)} (its deliveries are refused)")
        if extra:
            problems.append(f"also admits {', '.join(extra)}")
        if problems:
            return Check(queue.short, name, False, "; ".join(problems) + declared, fix)
        return Check(
            queue.short, name, True, f"Allow sns.amazonaws.com when aws:SourceArn = {names}{declared}"
        )

    def _kms(self, queue: QueueInfo) -> Check:
        name = "not encrypted with alias/aws/sqs"
        key = queue.attributes.get("KmsMasterKeyId")
        if not key:
            sse = "SSE-SQS" if queue.attributes.get("SqsManagedSseEnabled") == "true" else "no encryption"
            return Check(queue.short, name, True, sse)
        if key == "alias/aws/sqs" or key.endswith(":alias/aws/sqs") or self._aws_managed(key):
            return Check(
                queue.short,
                name,
                False,
                f"KmsMasterKeyId {key}: an AWS-managed key SNS may not use, so every delivery fails",
                "use SSE-SQS (what ReliableQueue does) or a customer-managed key granting "
                "sns.amazonaws.com kms:GenerateDataKey* and kms:Decrypt",
            )
        return Check(queue.short, name, True, f"customer-managed key {key}")

    def _aws_managed(self, key: str) -> bool:
        try:
            metadata = self.app.client("kms").describe_key(KeyId=key)["KeyMetadata"]
        except Exception:  # no kms:DescribeKey, or the emulator: judge by the id alone
            return False
        return bool(metadata.get("KeyManager") == "AWS")

    # consumer checks ----------------------------------------------------------------------------

    def _consumer(self, queue: QueueInfo, mapping: MappingInfo) -> list[Check]:
        subject = queue.short
        label = mapping.function_name.removeprefix(f"{self.app.prefix}-")
        declared = " (declared)" if mapping.source == DECLARED else ""
        return [
            self._visibility(queue, mapping, label),
            self._dlq(queue),
            Check(
                subject,
                f"{label}'s mapping enabled",
                mapping.enabled,
                f"{mapping.state}{declared}",
                f"aws lambda update-event-source-mapping --uuid {mapping.uuid} --enabled (once the cause "
                "of disabling it is gone: the backlog drains at once)",
            ),
            Check(
                subject,
                f"{label}'s mapping reports batch item failures",
                mapping.report_batch_item_failures,
                f"FunctionResponseTypes: {', '.join(mapping.function_response_types) or 'none'}{declared}",
                f"aws lambda update-event-source-mapping --uuid {mapping.uuid} --function-response-types "
                "ReportBatchItemFailures (QueueConsumer always sets it: this is drift)",
            ),
            *([self._dlq_alarm(queue, queue.dlq)] if queue.dlq is not None else []),
        ]

    def _visibility(self, queue: QueueInfo, mapping: MappingInfo, label: str) -> Check:
        name = f"visibility >= {VISIBILITY_FACTOR} × {label}'s timeout"
        function = self.functions.get(mapping.function_name)
        if function is None:
            found = f"function {mapping.function_name} not found"
            return Check(queue.short, name, False, found, "deploy it, or delete the mapping")
        needed = VISIBILITY_FACTOR * function.timeout
        detail = (
            f"visibility {queue.visibility_timeout} s, timeout {function.timeout} s (needs >= {needed} s)"
        )
        fix = (
            f"aws sqs set-queue-attributes --queue-url {queue.url} --attributes VisibilityTimeout={needed} "
            "(QueueConsumer sets it: this is drift), or shorten the function's timeout"
        )
        return Check(queue.short, name, queue.visibility_timeout >= needed, detail, fix)

    def _dlq(self, queue: QueueInfo) -> Check:
        name = f"a DLQ with maxReceiveCount >= {MIN_MAX_RECEIVE_COUNT}"
        if queue.dlq is None:
            if queue.dlq_arn:
                detail = f"its RedrivePolicy targets {queue.dlq_arn.rsplit(':', 1)[-1]}, which does not exist"
            else:
                detail = "no RedrivePolicy: a poison message is retried until it expires"
            return Check(
                queue.short, name, False, detail, "redeploy: ReliableQueue always gives a queue its DLQ"
            )
        count = queue.max_receive_count or 0
        fix = (
            "a low count parks messages that a throttled or crashed invocation merely failed to finish: "
            f"maxReceiveCount >= {MIN_MAX_RECEIVE_COUNT} (the stage config's queues.max_receive_count)"
        )
        detail = f"{queue.dlq.short}, maxReceiveCount {count}"
        return Check(queue.short, name, count >= MIN_MAX_RECEIVE_COUNT, detail, fix)

    def _dlq_alarm(self, queue: QueueInfo, dlq: QueueInfo) -> Check:
        name = f"an alarm on {dlq.short}"
        found = [a for a in self.alarms if _watches_depth(a, dlq.name)]
        if found:
            alarm = found[0]
            where = " (declared in cdk.out: the emulator holds no alarms)" if alarm.source == DECLARED else ""
            state = f", {alarm.state}" if alarm.state else ""
            return Check(queue.short, name, True, f"{alarm.name}{state}{where}")
        return Check(
            queue.short,
            name,
            False,
            "no alarm on its ApproximateNumberOfMessagesVisible: parked messages go unnoticed",
            "hand the queue to ServiceMonitoring in its stack and redeploy",
        )


def _arn_match(pattern: str, arn: str) -> bool:
    return pattern == arn or (("*" in pattern or "?" in pattern) and fnmatch.fnmatchcase(arn, pattern))


def _watches_depth(alarm: AlarmInfo, queue_name: str) -> bool:
    return (
        alarm.metric_name == "ApproximateNumberOfMessagesVisible"
        and alarm.namespace == "AWS/SQS"
        and alarm.dimensions.get("QueueName") == queue_name
    )


def render(checks: Iterable[Check]) -> list[str]:
    lines = []
    subject = None
    for check in checks:
        if check.subject != subject:
            subject = check.subject
            lines.append(subject)
        lines.append(f"  {'PASS' if check.ok else 'FAIL'}  {check.name}: {check.detail}")
        if not check.ok and check.fix:
            lines.append(f"        fix: {check.fix}")
    return lines


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "doctor",
        help="the SNS → SQS → Lambda checklist: PASS/FAIL with the fix; exit 1 on any FAIL",
        description="Check every subscription and consumer of a stage: subscription confirmed, queue policy "
        "admits only its topic, raw delivery as the consumer expects, no alias/aws/sqs key behind SNS, "
        "visibility >= 6 × the function timeout, a DLQ with maxReceiveCount >= 5, the mapping enabled "
        "with ReportBatchItemFailures, an alarm on the DLQ. Exit 1 on any FAIL.",
    )
    add_connection_arguments(parser)
    parser.add_argument("--service", help="only this service's queues (payments, orders, reports, scores)")
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    app = connect(args)
    checks = Doctor(app, service=args.service).run()
    failed = [c for c in checks if not c.ok]
    if args.json:
        print(
            json.dumps({"stage": app.stage, "checks": [c.to_json() for c in checks], "failed": len(failed)})
        )
    else:
        print(f"doctor: {app.describe()}")
        for line in render(checks):
            print(line)
        if not checks:
            print(f"nothing to check: no subscriptions or consumers named {app.prefix}-*")
        print(f"{len(checks)} checks: {len(checks) - len(failed)} PASS, {len(failed)} FAIL")
    return 1 if failed else 0
