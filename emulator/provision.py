"""Provision the synthesized templates into the emulator through the service APIs.

moto's CloudFormation silently skips half of our resource types (SNS subscriptions, API Gateway v2,
Scheduler, ...), so the sandbox does not use it: it walks every stack's resources in dependency
order and creates each one from the template's own properties. What runs locally instead of in the
emulator (functions, event source mappings, the HTTP API) is recorded as a spec for the runtime.
Every resource type that is not materialized is reported with the reason, so nothing is dropped
silently; a resource missing from the CDK app is missing here too.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from emulator.cloudformation import StackDescription, StackOutput
from emulator.iam import access_key_for, as_list
from emulator.server import ACCOUNT_ID, REGION, client
from emulator.templates import Physical, Resolver, Stack, Unresolved, asset_dir

# Types not materialized locally, with why. Printed once per type at start.
SKIPPED_TYPES: dict[str, str] = {
    "AWS::Lambda::Permission": (
        "resource policies on functions are not checked: the local glue (mappings, HTTP API, "
        "authorizers) invokes functions directly"
    ),
    "AWS::KMS::Key": (
        "encryption at rest is not emulated (resources are created unencrypted) and key policies are "
        "not evaluated; the topics use the AWS-managed aws/sns key, which needs no grant"
    ),
    "AWS::KMS::Alias": "encryption at rest is not emulated",
    "AWS::Logs::LogGroup": "function logs go to .sandbox/logs/<function>.log instead",
    "AWS::Logs::LogStream": "function logs go to .sandbox/logs/<function>.log instead",
    "AWS::CloudWatch::Dashboard": (
        "dashboards are not drawn; their metrics are what the alarms watch (emulator.alarm_service)"
    ),
    "AWS::ApiGatewayV2::Stage": (
        "the local HTTP API serves the $default stage; throttling and access logs are not applied"
    ),
    "AWS::CDK::Metadata": "",
}

# Types implemented by the local glue rather than the emulator.
LOCAL_TYPES = {
    "AWS::Lambda::Function",
    "AWS::Lambda::LayerVersion",
    "AWS::Lambda::EventSourceMapping",
    "AWS::ApiGatewayV2::Api",
    "AWS::ApiGatewayV2::Integration",
    "AWS::ApiGatewayV2::Route",
    "AWS::ApiGatewayV2::Authorizer",
    "AWS::Scheduler::Schedule",
    "AWS::Events::Rule",
    "AWS::Events::Connection",
    "AWS::Events::ApiDestination",
}

# An AWS::CloudWatch::Alarm's properties, each passed to PutMetricAlarm under its own name.
ALARM_PROPERTIES = frozenset(
    {
        "ActionsEnabled", "AlarmActions", "AlarmDescription", "AlarmName", "ComparisonOperator",
        "DatapointsToAlarm", "Dimensions", "EvaluateLowSampleCountPercentile", "EvaluationPeriods",
        "ExtendedStatistic", "InsufficientDataActions", "MetricName", "Metrics", "Namespace",
        "OKActions", "Period", "Statistic", "Tags", "Threshold", "ThresholdMetricId",
        "TreatMissingData", "Unit",
    }
)  # fmt: skip

# CloudFormation dynamic references:
# ``{{resolve:secretsmanager:<id>:SecretString:<json-key>:<stage>:<version>}}``.
DYNAMIC_REFERENCE = re.compile(r"\{\{resolve:(?P<service>[a-z-]+):(?P<body>[^}]*)\}\}")


@dataclass
class FunctionSpec:
    name: str
    logical_id: str
    stack: str
    handler: str
    code_dir: Path
    layer_dirs: list[Path]
    environment: dict[str, str]
    timeout: int
    memory: int
    arn: str


@dataclass
class MappingSpec:
    function: str
    source_arn: str
    kind: str  # "sqs" | "dynamodb"
    batch_size: int
    batching_window: float
    report_batch_item_failures: bool
    max_concurrency: int | None
    starting_position: str
    max_retry_attempts: int
    on_failure_arn: str | None
    bisect_on_error: bool
    enabled: bool
    parallelization_factor: int = 1


@dataclass
class AuthorizerSpec:
    """An HTTP API Lambda authorizer (REQUEST type)."""

    name: str
    authorizer_id: str
    function: str
    identity_source: list[str]  # "$request.header.x-api-key", "$request.querystring.k", ...
    payload_version: str
    simple_responses: bool
    ttl_seconds: int


@dataclass
class RouteSpec:
    route_key: str
    function: str
    authorization: str
    payload_version: str
    authorizer: AuthorizerSpec | None = None


@dataclass
class HttpApiSpec:
    name: str
    api_id: str
    stack: str = ""
    routes: list[RouteSpec] = field(default_factory=list)
    authorizers: dict[str, AuthorizerSpec] = field(default_factory=dict)

    @property
    def aws_endpoint(self) -> str:
        """What ``Fn::GetAtt ApiEndpoint`` (and so an API destination) holds for this API in AWS."""
        return f"https://{self.api_id}.execute-api.{REGION}.amazonaws.com"


@dataclass
class RetryPolicy:
    maximum_retry_attempts: int
    maximum_event_age_seconds: int


# The templated targets the sandbox fires (``emulator.eventbridge``): an event bus (PutEvents) or an SQS
# queue (SendMessage), told apart by the target ARN as Scheduler does.
TargetKind = Literal["event-bus", "sqs"]


def schedule_target_kind(target_arn: str) -> TargetKind | None:
    """``"sqs"`` for ``arn:aws:sqs:...``, ``"event-bus"`` for ``...:event-bus/<name>``; else None."""
    if target_arn.startswith("arn:aws:sqs:"):
        return "sqs"
    if ":event-bus/" in target_arn:
        return "event-bus"
    return None


@dataclass
class ScheduleSpec:
    """An ``AWS::Scheduler::Schedule`` the sandbox fires: its target is an event bus (PutEvents of
    ``input`` as the detail, with ``source`` and ``detail_type`` from ``EventBridgeParameters``) or an SQS
    queue (SendMessage of ``input`` as the body to ``queue_url``, with ``message_group_id`` from
    ``SqsParameters`` for a FIFO queue). ``target_kind`` says which."""

    name: str
    arn: str
    expression: str
    timezone: str
    enabled: bool
    target_arn: str
    source: str  # event-bus targets only ("" for a queue)
    detail_type: str  # event-bus targets only ("" for a queue)
    input: str
    retry: RetryPolicy
    dlq_arn: str | None
    role_arn: str = ""  # the execution role Scheduler calls the target (and dead-letters) with
    queue_url: str = ""  # SQS targets only: the target queue's URL in the emulator
    message_group_id: str | None = None  # SQS targets only: SqsParameters.MessageGroupId (FIFO)

    @property
    def target_kind(self) -> TargetKind:
        """``"sqs"`` or ``"event-bus"``, from the target ARN (the provisioner accepts no other)."""
        return schedule_target_kind(self.target_arn) or "event-bus"

    @property
    def target_name(self) -> str:
        """The bus's or the queue's name: the last part of the target ARN."""
        return re.split(r"[:/]", self.target_arn)[-1]

    @property
    def caller(self) -> str:
        """Its name as an IAM caller in the sandbox (``emulator.iam.access_key_for``)."""
        return f"schedule {self.name}"


@dataclass
class TargetSpec:
    target_id: str
    arn: str
    input_path: str | None
    retry: RetryPolicy
    dlq_arn: str | None


@dataclass
class RuleSpec:
    name: str
    arn: str
    event_bus: str  # name
    pattern: dict[str, Any]
    enabled: bool
    targets: list[TargetSpec] = field(default_factory=list)


@dataclass
class ConnectionSpec:
    name: str
    arn: str
    authorization_type: str


@dataclass
class ApiDestinationSpec:
    name: str
    arn: str
    connection_arn: str
    endpoint: str
    method: str
    rate_limit_per_second: int | None


@dataclass
class IamModel:
    """Who may call what, from the templates: every role's policies (identity-based) and every queue,
    topic and bucket policy (resource-based), as ``emulator.iam_enforcer`` evaluates them."""

    roles: dict[str, str] = field(default_factory=dict)  # role name -> role ARN
    role_policies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # role name -> policies
    resource_policies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # ARN -> policies
    # caller -> role ARN: every function, and every schedule ("schedule <name>": its execution role)
    caller_roles: dict[str, str] = field(default_factory=dict)
    queues: list[str] = field(default_factory=list)  # queue ARNs (SNS deliveries to them are checked)
    # role name -> the AWS services its trust policy lets assume it (SNS for a Firehose subscription,
    # Firehose for its S3 destination): those services' calls as the role are checked against its policies
    service_trust: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The model for the emulator: each caller with the access key it signs with and its policies."""
        names = {arn: name for name, arn in self.roles.items()}
        callers = [
            {
                "function": caller,
                "accessKeyId": access_key_for(caller),
                "role": role_arn,
                "policies": self.role_policies.get(names.get(role_arn, ""), []),
            }
            for caller, role_arn in sorted(self.caller_roles.items())
        ]
        return {
            "account": ACCOUNT_ID,
            "region": REGION,
            "functions": callers,
            "resourcePolicies": self.resource_policies,
            "queues": self.queues,
            "serviceRoles": [
                {"role": self.roles[name], "services": services, "policies": self.role_policies.get(name, [])}
                for name, services in sorted(self.service_trust.items())
                if name in self.roles
            ],
        }


@dataclass
class Topology:
    """Everything provisioned, as the runtime, mappings, HTTP API and status need it."""

    functions: dict[str, FunctionSpec] = field(default_factory=dict)
    mappings: list[MappingSpec] = field(default_factory=list)
    apis: list[HttpApiSpec] = field(default_factory=list)
    schedules: list[ScheduleSpec] = field(default_factory=list)
    rules: list[RuleSpec] = field(default_factory=list)
    connections: dict[str, ConnectionSpec] = field(default_factory=dict)  # arn -> spec
    api_destinations: dict[str, ApiDestinationSpec] = field(default_factory=dict)  # arn -> spec
    secrets: dict[str, str] = field(default_factory=dict)  # logical "stack/id" -> arn
    queues: dict[str, str] = field(default_factory=dict)  # name -> url
    tables: dict[str, str] = field(default_factory=dict)  # name -> stream arn ("" without a stream)
    topics: dict[str, str] = field(default_factory=dict)  # name -> arn
    buckets: list[str] = field(default_factory=list)
    alarms: list[str] = field(default_factory=list)  # CloudWatch alarm names, as PutMetricAlarm made them
    dlqs: set[str] = field(default_factory=set)  # queue names some redrive/on-failure points at
    iam: IamModel = field(default_factory=IamModel)
    # Each stack as CloudFormation's DescribeStacks would describe it, outputs resolved
    # (emulator.cloudformation answers DescribeStacks with them).
    stacks: list[StackDescription] = field(default_factory=list)
    created: Counter[str] = field(default_factory=Counter)
    skipped: dict[str, str] = field(default_factory=dict)  # "type" or "type logical-id" -> why
    notes: list[str] = field(default_factory=list)

    def report(self) -> list[str]:
        lines = ["provisioned from the templates:"]
        for kind, count in sorted(self.created.items()):
            lines.append(f"  {count:3d} × {kind}")
        if self.skipped:
            lines.append("not materialized locally:")
            for kind, why in sorted(self.skipped.items()):
                lines.append(f"  {kind}: {why}")
        lines.extend(f"note: {note}" for note in self.notes)
        return lines


def _arn(service: str, resource: str) -> str:
    return f"arn:aws:{service}:{REGION}:{ACCOUNT_ID}:{resource}"


def _generated_name(stack: str, logical_id: str, limit: int = 64) -> str:
    # CloudFormation generates <stack>-<logical>-<suffix>; a stable name keeps re-runs predictable.
    return f"{stack}-{logical_id}"[:limit]


def _foreign_native_code(directory: Path) -> str | None:
    """The first native extension under ``directory`` this interpreter cannot load, if any."""
    # Only tagged names can be judged (``.cpython-314-aarch64-linux-gnu.so``); a bare ``.so`` passes.
    suffixes = tuple(s for s in importlib.machinery.EXTENSION_SUFFIXES if s != ".so")
    for path in directory.rglob("*.so"):
        if re.search(r"\.(cpython-|abi3|cp\d)", path.name) and not path.name.endswith(suffixes):
            return path.name
    return None


class Provisioner:
    """Provisions into the emulator at ``endpoint``. The handler tests provision the same templates
    into moto's in-process ``mock_aws`` instead (tests/handlers/stack_world.py): ``endpoint=None``
    (boto3's own AWS endpoints, which ``mock_aws`` answers), and ``clients`` to reuse one boto3 client
    per service across their many short-lived worlds."""

    def __init__(
        self, endpoint: str | None, cdk_out: Path, *, clients: Callable[[str], Any] | None = None
    ) -> None:
        self.endpoint = endpoint
        self.cdk_out = cdk_out
        make = clients or (lambda service: client(service, endpoint))
        self.sqs = make("sqs")
        self.sns = make("sns")
        self.ddb = make("dynamodb")
        self.s3 = make("s3")
        self.events = make("events")
        self.secretsmanager = make("secretsmanager")
        self.scheduler = make("scheduler")
        self.firehose = make("firehose")
        self.cloudwatch = make("cloudwatch")
        self.topology = Topology()
        self.exports: dict[str, Any] = {}
        self.layers: dict[str, Path | None] = {}  # layer version arn -> python dir (None: unusable)

    def provision(self, stacks: list[Stack]) -> Topology:
        for stack in stacks:
            self._provision_stack(stack)
        return self.topology

    def _provision_stack(self, stack: Stack) -> None:
        physical: dict[str, Physical] = {}
        resolver = Resolver(stack, physical, self.exports)
        resources = stack.resources
        for logical_id in _dependency_order(resources, resolver):
            resource = resources[logical_id]
            kind = str(resource["Type"])
            try:
                props = self._dynamic_references(resolver.resolve(resource.get("Properties", {})))
                physical[logical_id] = self._create(stack, logical_id, kind, props)
            except Unresolved as exc:
                self.topology.skipped[f"{kind} {logical_id}"] = str(exc)
                continue
        for output in stack.outputs.values():
            name = output.get("Export", {}).get("Name")
            if name:
                try:
                    self.exports[name] = resolver.resolve(output["Value"])
                except Unresolved as exc:
                    self.topology.skipped[f"export {name}"] = str(exc)
        self.topology.stacks.append(self._description(stack, resolver))

    def _description(self, stack: Stack, resolver: Resolver) -> StackDescription:
        """The stack as DescribeStacks answers after a deploy: its outputs resolved against what was
        provisioned, as CloudFormation resolves them (an output the sandbox cannot resolve is left out,
        and reported)."""
        outputs = []
        for key, output in stack.outputs.items():
            try:
                value = resolver.resolve(output["Value"])
                export = resolver.resolve(output["Export"]["Name"]) if "Export" in output else None
                description = resolver.resolve(output["Description"]) if "Description" in output else None
            except Unresolved as exc:
                self.topology.skipped[f"output {stack.name}.{key}"] = str(exc)
                continue
            outputs.append(
                StackOutput(
                    key=key,
                    value=",".join(map(str, value)) if isinstance(value, list) else str(value),
                    description=None if description is None else str(description),
                    export_name=None if export is None else str(export),
                )
            )
        parameters = tuple(
            (str(name), str(parameter["Default"]))
            for name, parameter in (stack.template.get("Parameters") or {}).items()
            if "Default" in parameter
        )
        description = stack.template.get("Description")
        return StackDescription(
            name=stack.name,
            stack_id=str(resolver.pseudo("AWS::StackId")),
            created=datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            outputs=tuple(outputs),
            parameters=parameters,
            description=str(description) if description is not None else None,
            termination_protection=self._termination_protection(stack.name),
        )

    def _termination_protection(self, stack_name: str) -> bool:
        """What ``cdk deploy`` sets: the assembly manifest's ``terminationProtection`` for the stack."""
        try:
            manifest = json.loads((self.cdk_out / "manifest.json").read_text())
        except (OSError, ValueError):
            return False
        artifact = (manifest.get("artifacts") or {}).get(stack_name) or {}
        return bool((artifact.get("properties") or {}).get("terminationProtection", False))

    # one method per resource type ------------------------------------------------------------

    def _create(self, stack: Stack, logical_id: str, kind: str, props: dict[str, Any]) -> Physical:
        handler = {
            "AWS::SQS::Queue": self._queue,
            "AWS::SNS::Topic": self._topic,
            "AWS::SNS::Subscription": self._subscription,
            "AWS::CloudWatch::Alarm": self._alarm,
            "AWS::DynamoDB::Table": self._table,
            "AWS::S3::Bucket": self._bucket,
            "AWS::KinesisFirehose::DeliveryStream": self._delivery_stream,
            "AWS::Events::EventBus": self._event_bus,
            "AWS::Lambda::LayerVersion": self._layer,
            "AWS::Lambda::Function": self._function,
            "AWS::Lambda::EventSourceMapping": self._mapping,
            "AWS::ApiGatewayV2::Api": self._http_api,
            "AWS::ApiGatewayV2::Integration": self._integration,
            "AWS::ApiGatewayV2::Route": self._route,
            "AWS::ApiGatewayV2::Authorizer": self._authorizer,
            "AWS::SecretsManager::Secret": self._secret,
            "AWS::Scheduler::Schedule": self._schedule,
            "AWS::Events::Connection": self._connection,
            "AWS::Events::ApiDestination": self._api_destination,
            "AWS::Events::Rule": self._rule,
            "AWS::IAM::Role": self._role,
            "AWS::IAM::Policy": self._policy,
            "AWS::IAM::ManagedPolicy": self._policy,
            "AWS::SQS::QueuePolicy": self._queue_policy,
            "AWS::SNS::TopicPolicy": self._topic_policy,
            "AWS::S3::BucketPolicy": self._bucket_policy,
        }.get(kind)
        if handler is None:
            why = SKIPPED_TYPES.get(kind)
            if why is None:
                why = "the sandbox has no local materialization for this type yet"
            if why:
                self.topology.skipped[kind] = why
            # Placeholder ids keep references to skipped resources (role ARNs, key ARNs) resolvable.
            return Physical(
                ref=f"{stack.name}-{logical_id}",
                attrs={"Arn": _arn(kind.split("::")[1].lower(), logical_id), "Id": logical_id},
            )
        physical = handler(stack, logical_id, props)
        self.topology.created[kind] += 1
        return physical

    def _queue(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        fifo = bool(props.get("FifoQueue"))
        name = props.get("QueueName") or _generated_name(stack.name, logical_id, 80 - 5 * fifo)
        if fifo and not name.endswith(".fifo"):
            name += ".fifo"
        attributes: dict[str, str] = {}
        for key in (
            "DelaySeconds",
            "MaximumMessageSize",
            "MessageRetentionPeriod",
            "ReceiveMessageWaitTimeSeconds",
            "VisibilityTimeout",
            "FifoQueue",
            "ContentBasedDeduplication",
            "DeduplicationScope",
            "FifoThroughputLimit",
            "SqsManagedSseEnabled",
        ):
            if key in props:
                value = props[key]
                attributes[key] = str(value).lower() if isinstance(value, bool) else str(value)
        for key in ("RedrivePolicy", "RedriveAllowPolicy"):
            if key in props:
                attributes[key] = json.dumps(props[key])
        if "RedrivePolicy" in props:
            self.topology.dlqs.add(str(props["RedrivePolicy"]["deadLetterTargetArn"]).rsplit(":", 1)[-1])
        url = self.sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        arn = _arn("sqs", name)
        self.topology.queues[name] = url
        self.topology.iam.queues.append(arn)
        return Physical(ref=url, attrs={"Arn": arn, "QueueName": name, "QueueUrl": url})

    # IAM: recorded for the emulator's enforcement (emulator.iam_enforcer), not created in moto ----------

    def _role(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        name = props.get("RoleName") or _generated_name(stack.name, logical_id)
        arn = f"arn:aws:iam::{ACCOUNT_ID}:role{props.get('Path', '/')}{name}"
        iam = self.topology.iam
        iam.roles[name] = arn
        services = sorted(
            str(service)
            for statement in (props.get("AssumeRolePolicyDocument") or {}).get("Statement", [])
            if statement.get("Effect") == "Allow"
            for service in as_list((statement.get("Principal") or {}).get("Service"))
            if str(service) != "lambda.amazonaws.com"
        )
        if services:
            iam.service_trust[name] = services
        policies = iam.role_policies.setdefault(name, [])
        for policy in props.get("Policies", []):
            policies.append({"name": f"{stack.name}/{logical_id}/{policy['PolicyName']}",
                             "document": policy["PolicyDocument"]})  # fmt: skip
        for managed in props.get("ManagedPolicyArns", []):
            # AWS-managed policies' documents are not in the templates; a role that needs one would be
            # denied here what AWS allows, so say so instead of guessing.
            self.topology.notes.append(f"role {name}: managed policy {managed} is not evaluated (no grants)")
        return Physical(ref=name, attrs={"Arn": arn, "RoleId": f"AROA{logical_id[:16].upper()}"})

    def _policy(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        policy_name = str(props.get("PolicyName") or props.get("ManagedPolicyName") or logical_id)
        for role in props.get("Roles", []):
            self.topology.iam.role_policies.setdefault(str(role), []).append(
                {"name": f"{stack.name}/{logical_id}", "document": props["PolicyDocument"]}
            )
        return Physical(ref=policy_name, attrs={"Id": policy_name})

    def _resource_policy(self, stack: Stack, logical_id: str, arns: list[str], document: Any) -> Physical:
        for arn in arns:
            self.topology.iam.resource_policies.setdefault(arn, []).append(
                {"name": f"{stack.name}/{logical_id}", "document": document}
            )
        return Physical(ref=f"{stack.name}-{logical_id}")

    def _queue_policy(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        arns = [_arn("sqs", str(url).rstrip("/").rsplit("/", 1)[-1]) for url in props["Queues"]]
        return self._resource_policy(stack, logical_id, arns, props["PolicyDocument"])

    def _topic_policy(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        return self._resource_policy(
            stack, logical_id, [str(t) for t in props["Topics"]], props["PolicyDocument"]
        )

    def _bucket_policy(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        arn = f"arn:aws:s3:::{props['Bucket']}"
        return self._resource_policy(stack, logical_id, [arn], props["PolicyDocument"])

    def _topic(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        name = props.get("TopicName") or _generated_name(stack.name, logical_id, 256)
        attributes = {}
        for key in ("FifoTopic", "ContentBasedDeduplication"):
            if key in props:
                attributes[key] = str(props[key]).lower()
        arn = self.sns.create_topic(Name=name, Attributes=attributes)["TopicArn"]
        self.topology.topics[name] = arn
        return Physical(ref=arn, attrs={"TopicArn": arn, "TopicName": name})

    def _alarm(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        """PutMetricAlarm with the template's properties, references resolved (the alarm topic's ARN,
        the queue's name); CloudWatch's refusal of an invalid alarm fails the stage, as it fails the
        deploy. The alarm starts INSUFFICIENT_DATA (patch 16) until emulator.alarm_service evaluates it."""
        unsupported = sorted(set(props) - ALARM_PROPERTIES)
        if unsupported:
            raise ValueError(
                f"{stack.name}/{logical_id} (AWS::CloudWatch::Alarm): Encountered unsupported property "
                f"{unsupported[0]}"
            )
        # CloudFormation names an alarm without AlarmName <stack>-<logical id>-<suffix>.
        name = str(props.get("AlarmName") or _generated_name(stack.name, logical_id, 255))
        params = {key: value for key, value in props.items() if key != "AlarmName"}
        for key in ("Period", "EvaluationPeriods", "DatapointsToAlarm"):
            if key in params:
                params[key] = int(params[key])
        if "Threshold" in params:
            params["Threshold"] = float(params["Threshold"])
        if "ActionsEnabled" in params:
            params["ActionsEnabled"] = str(params["ActionsEnabled"]).lower() == "true"
        self.cloudwatch.put_metric_alarm(AlarmName=name, **params)
        self.topology.alarms.append(name)
        arn = _arn("cloudwatch", f"alarm:{name}")
        return Physical(ref=name, attrs={"Arn": arn})

    def _subscription(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        attributes: dict[str, str] = {}
        if "SubscriptionRoleArn" in props:
            attributes["SubscriptionRoleArn"] = str(props["SubscriptionRoleArn"])
        for key in ("FilterPolicy", "RedrivePolicy", "DeliveryPolicy"):
            if key in props:
                attributes[key] = json.dumps(props[key])
        if "RedrivePolicy" in props:
            self.topology.dlqs.add(str(props["RedrivePolicy"]["deadLetterTargetArn"]).rsplit(":", 1)[-1])
        if "FilterPolicyScope" in props:
            attributes["FilterPolicyScope"] = str(props["FilterPolicyScope"])
        if "RawMessageDelivery" in props:
            attributes["RawMessageDelivery"] = str(props["RawMessageDelivery"]).lower()
        arn = self.sns.subscribe(
            TopicArn=props["TopicArn"],
            Protocol=props["Protocol"],
            Endpoint=props["Endpoint"],
            Attributes=attributes,
            ReturnSubscriptionArn=True,
        )["SubscriptionArn"]
        return Physical(ref=arn, attrs={"Arn": arn})

    def _table(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        name = props.get("TableName") or _generated_name(stack.name, logical_id, 255)
        params: dict[str, Any] = {
            "TableName": name,
            "AttributeDefinitions": props["AttributeDefinitions"],
            "KeySchema": props["KeySchema"],
            "BillingMode": props.get("BillingMode", "PROVISIONED"),
        }
        if params["BillingMode"] == "PROVISIONED":
            params["ProvisionedThroughput"] = props.get(
                "ProvisionedThroughput", {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5}
            )
        for key in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
            if key in props:
                params[key] = props[key]
        stream = props.get("StreamSpecification")
        if stream:
            params["StreamSpecification"] = {
                "StreamEnabled": True,
                "StreamViewType": stream["StreamViewType"],
            }
        description = self.ddb.create_table(**params)["TableDescription"]
        ttl = props.get("TimeToLiveSpecification")
        if ttl and ttl.get("Enabled"):
            self.ddb.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={"AttributeName": ttl["AttributeName"], "Enabled": True},
            )
            self.topology.skipped["DynamoDB TTL"] = "recorded, but the emulator never expires items"
        stream_arn = description.get("LatestStreamArn", "")
        self.topology.tables[name] = stream_arn
        return Physical(ref=name, attrs={"Arn": description["TableArn"], "StreamArn": stream_arn})

    def _bucket(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        name = props.get("BucketName") or _generated_name(stack.name, logical_id, 63).lower()
        self.s3.create_bucket(Bucket=name)
        lifecycle = props.get("LifecycleConfiguration")
        if lifecycle:
            rules = []
            for i, rule in enumerate(lifecycle.get("Rules", [])):
                converted: dict[str, Any] = {
                    "ID": rule.get("Id", f"rule-{i}"),
                    "Status": rule["Status"],
                    "Filter": {"Prefix": rule.get("Prefix", "")},
                }
                if "ExpirationInDays" in rule:
                    converted["Expiration"] = {"Days": int(rule["ExpirationInDays"])}
                rules.append(converted)
            self.s3.put_bucket_lifecycle_configuration(Bucket=name, LifecycleConfiguration={"Rules": rules})
            self.topology.skipped["S3 lifecycle expiration"] = (
                "recorded, but the emulator never expires objects"
            )
        self.topology.buckets.append(name)
        return Physical(
            ref=name,
            attrs={
                "Arn": f"arn:aws:s3:::{name}",
                "DomainName": f"{name}.s3.amazonaws.com",
                "RegionalDomainName": f"{name}.s3.{REGION}.amazonaws.com",
            },
        )

    def _delivery_stream(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        """A Direct PUT stream to S3 (the only kind Relay makes); emulator.patches.firehose_delivery
        writes its records as Firehose does, as its role."""
        name = props.get("DeliveryStreamName") or _generated_name(stack.name, logical_id, 64)
        s3_destination = "ExtendedS3DestinationConfiguration"
        if props.get("DeliveryStreamType", "DirectPut") != "DirectPut" or s3_destination not in props:
            raise Unresolved(f"delivery stream {name}: only a Direct PUT stream to S3 is emulated")
        s3 = props[s3_destination]
        keys = (
            "RoleARN",
            "BucketARN",
            "Prefix",
            "ErrorOutputPrefix",
            "BufferingHints",
            "CompressionFormat",
            "ProcessingConfiguration",
        )
        self.firehose.create_delivery_stream(
            DeliveryStreamName=name,
            DeliveryStreamType="DirectPut",
            ExtendedS3DestinationConfiguration={k: s3[k] for k in keys if k in s3},
        )
        arn = f"arn:aws:firehose:{REGION}:{ACCOUNT_ID}:deliverystream/{name}"
        return Physical(ref=name, attrs={"Arn": arn})

    def _event_bus(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        name = props["Name"]
        arn = self.events.create_event_bus(Name=name)["EventBusArn"]
        return Physical(ref=name, attrs={"Arn": arn, "Name": name})

    def _layer(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        # CloudFormation names an unnamed layer after its stack and logical id: each stack has its own.
        arn = _arn("lambda", f"layer:{props.get('LayerName') or _generated_name(stack.name, logical_id)}:1")
        python_dir = asset_dir(self.cdk_out, props["Content"]) / "python"
        foreign = _foreign_native_code(python_dir) if python_dir.is_dir() else None
        if foreign is not None:
            # A layer built for the Lambda platform (arm64, python3.13 wheels) cannot load on this
            # interpreter; the sandbox's own venv holds the same pinned packages instead.
            self.layers[arn] = None
            self.topology.notes.append(
                f"layer {logical_id}: {foreign} is built for another platform/Python; "
                "its packages come from the sandbox's .venv instead (same pins)"
            )
        else:
            self.layers[arn] = python_dir
        return Physical(ref=arn, attrs={"LayerVersionArn": arn})

    def _function(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        name = props.get("FunctionName") or _generated_name(stack.name, logical_id)
        arn = _arn("lambda", f"function:{name}")
        layer_dirs = []
        for layer in props.get("Layers", []):
            if layer not in self.layers:
                raise Unresolved(f"layer {layer} is not provisioned")
            directory = self.layers[layer]
            if directory is not None:
                layer_dirs.append(directory)
        env = {k: str(v) for k, v in props.get("Environment", {}).get("Variables", {}).items()}
        self.topology.iam.caller_roles[name] = str(props["Role"])
        self.topology.functions[name] = FunctionSpec(
            name=name,
            logical_id=logical_id,
            stack=stack.name,
            handler=props["Handler"],
            code_dir=asset_dir(self.cdk_out, props["Code"]),
            layer_dirs=layer_dirs,
            environment=env,
            timeout=int(props.get("Timeout", 3)),
            memory=int(props.get("MemorySize", 128)),
            arn=arn,
        )
        return Physical(ref=name, attrs={"Arn": arn})

    def _mapping(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        source = str(props["EventSourceArn"])
        kind = "sqs" if source.startswith("arn:aws:sqs:") else "dynamodb" if ":dynamodb:" in source else ""
        if not kind:
            raise Unresolved(f"event source {source}: only SQS and DynamoDB streams are supported locally")
        function = str(props["FunctionName"]).rsplit(":", 1)[-1]
        on_failure = props.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination")
        if on_failure:
            self.topology.dlqs.add(str(on_failure).rsplit(":", 1)[-1])
        self.topology.mappings.append(
            MappingSpec(
                function=function,
                source_arn=source,
                kind=kind,
                # Lambda's defaults: 10 for SQS, 100 for streams.
                batch_size=int(props.get("BatchSize", 10 if kind == "sqs" else 100)),
                batching_window=float(props.get("MaximumBatchingWindowInSeconds", 0)),
                report_batch_item_failures="ReportBatchItemFailures"
                in props.get("FunctionResponseTypes", []),
                max_concurrency=(props.get("ScalingConfig") or {}).get("MaximumConcurrency"),
                starting_position=str(props.get("StartingPosition", "TRIM_HORIZON")),
                # -1 (the default) is "retry until the record expires"; 10000 stands in for that.
                max_retry_attempts=int(props.get("MaximumRetryAttempts", -1)) % 10001,
                on_failure_arn=on_failure,
                bisect_on_error=bool(props.get("BisectBatchOnFunctionError", False)),
                enabled=bool(props.get("Enabled", True)),
                parallelization_factor=int(props.get("ParallelizationFactor", 1)),
            )
        )
        return Physical(ref=f"{function}-{logical_id}")

    def _http_api(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        if props.get("ProtocolType") != "HTTP":
            raise Unresolved(f"API {logical_id}: only HTTP APIs are served locally (WebSocket is not)")
        # API ids are 10 lowercase alphanumerics; CDK gives every stack's API the same logical id
        # ("HttpApi4E1D4184"), so the id is derived from stack and logical id to stay unique.
        api_id = hashlib.sha256(f"{stack.name}/{logical_id}".encode()).hexdigest()[:10]
        api = HttpApiSpec(name=props.get("Name", logical_id), api_id=api_id, stack=stack.name)
        self.topology.apis.append(api)
        return Physical(ref=api.api_id, attrs={"ApiEndpoint": api.aws_endpoint, "ApiId": api.api_id})

    def _integration(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        if props.get("IntegrationType") != "AWS_PROXY":
            raise Unresolved(f"integration {logical_id}: only Lambda proxy integrations are served locally")
        uri = str(props["IntegrationUri"])
        function = uri.split(":function:", 1)[-1].split("/", 1)[0].split(":", 1)[0]
        version = str(props.get("PayloadFormatVersion", "2.0"))
        return Physical(ref=f"{function}|{version}")

    def _api(self, api_id: Any) -> HttpApiSpec:
        return next(a for a in self.topology.apis if a.api_id == api_id)

    def _authorizer(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        name = str(props.get("Name", logical_id))
        if props.get("AuthorizerType") != "REQUEST":
            raise Unresolved(f"authorizer {name}: only Lambda (REQUEST) authorizers run locally, not JWT")
        version = str(props.get("AuthorizerPayloadFormatVersion", ""))
        if version != "2.0":
            raise Unresolved(f"authorizer {name}: only payload format 2.0 authorizers run locally")
        uri = str(props["AuthorizerUri"])
        function = uri.split(":function:", 1)[-1].split("/", 1)[0].split(":", 1)[0]
        if function not in self.topology.functions:
            raise Unresolved(f"authorizer {name}: function {function} is not provisioned")
        authorizer_id = hashlib.sha256(f"{stack.name}/{logical_id}".encode()).hexdigest()[:6]
        spec = AuthorizerSpec(
            name=name,
            authorizer_id=authorizer_id,
            function=function,
            identity_source=[str(s) for s in props.get("IdentitySource") or []],
            payload_version=version,
            simple_responses=bool(props.get("EnableSimpleResponses", False)),
            ttl_seconds=int(props.get("AuthorizerResultTtlInSeconds", 0)),
        )
        self._api(props["ApiId"]).authorizers[authorizer_id] = spec
        return Physical(ref=authorizer_id, attrs={"AuthorizerId": authorizer_id})

    def _route(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        target = str(props.get("Target", ""))
        if not target.startswith("integrations/"):
            raise Unresolved(f"route {props.get('RouteKey')}: no integration target")
        function, _, version = target.removeprefix("integrations/").partition("|")
        if version != "2.0":
            raise Unresolved(f"route {props.get('RouteKey')}: only payload format 2.0 is served locally")
        authorization = str(props.get("AuthorizationType", "NONE"))
        api = self._api(props["ApiId"])
        authorizer = None
        if authorization == "CUSTOM":
            authorizer = api.authorizers.get(str(props.get("AuthorizerId")))
            if authorizer is None:
                raise Unresolved(f"route {props.get('RouteKey')}: its authorizer is not provisioned")
        elif authorization == "JWT":
            raise Unresolved(f"route {props.get('RouteKey')}: JWT authorizers are not implemented locally")
        api.routes.append(RouteSpec(str(props["RouteKey"]), function, authorization, version, authorizer))
        return Physical(ref=f"{api.api_id}-{logical_id}")

    # secrets and dynamic references ----------------------------------------------------------

    def _secret(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        # CloudFormation names an unnamed secret <logical-id>-<random>; the ARN adds its own suffix.
        name = props.get("Name") or f"{logical_id}-{hashlib.sha256(stack.name.encode()).hexdigest()[:12]}"
        value = props.get("SecretString")
        generate = props.get("GenerateSecretString")
        if value is None and generate is not None:
            value = self._generate_secret_string(generate)
        params: dict[str, Any] = {"Name": name, "SecretString": value if value is not None else ""}
        if props.get("Description"):
            params["Description"] = props["Description"]
        arn = self.secretsmanager.create_secret(**params)["ARN"]
        self.topology.secrets[f"{stack.name}/{logical_id}"] = arn
        return Physical(ref=arn, attrs={"Id": arn})

    def _generate_secret_string(self, generate: dict[str, Any]) -> str:
        """A random value as Secrets Manager generates it (GetRandomPassword with the same options)."""
        options = {
            key: generate[key]
            for key in (
                "PasswordLength",
                "ExcludeCharacters",
                "ExcludeNumbers",
                "ExcludePunctuation",
                "ExcludeUppercase",
                "ExcludeLowercase",
                "IncludeSpace",
                "RequireEachIncludedType",
            )
            if key in generate
        }
        password = str(self.secretsmanager.get_random_password(**options)["RandomPassword"])
        template, key = generate.get("SecretStringTemplate"), generate.get("GenerateStringKey")
        if template and key:
            document = json.loads(template)
            document[key] = password
            return json.dumps(document)
        return password

    def _dynamic_references(self, value: Any) -> Any:
        """Resolve ``{{resolve:secretsmanager:...}}`` as CloudFormation does at deploy time."""
        if isinstance(value, list):
            return [self._dynamic_references(v) for v in value]
        if isinstance(value, dict):
            return {k: self._dynamic_references(v) for k, v in value.items()}
        if isinstance(value, str) and "{{resolve:" in value:
            return DYNAMIC_REFERENCE.sub(lambda m: resolve_dynamic_reference(m, self.secretsmanager), value)
        return value

    # Scheduler, rules, connections, API destinations -----------------------------------------
    # Created in the emulator too (so `aws scheduler list-schedules`, `aws events describe-connection`
    # work), but fired and delivered by emulator.eventbridge: moto never fires a schedule and never calls
    # an API destination.

    def _schedule(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        name = props.get("Name") or _generated_name(stack.name, logical_id)
        group = props.get("GroupName", "default")
        target = props["Target"]
        target_arn = str(target["Arn"])
        kind = schedule_target_kind(target_arn)
        if kind is None:
            raise Unresolved(
                f"schedule {name}: target {target_arn} is not fired locally; only event-bus (PutEvents) "
                "and SQS queue (SendMessage) targets are"
            )
        queue_url = ""
        if kind == "sqs":
            queue = target_arn.rsplit(":", 1)[-1]
            queue_url = self.topology.queues.get(queue, "")
            if not queue_url:
                raise Unresolved(
                    f"schedule {name}: its target queue {queue} is not declared by the templates, so "
                    "there is nothing to send to locally"
                )
        bridge = target.get("EventBridgeParameters") or {}
        group_id = (target.get("SqsParameters") or {}).get("MessageGroupId")
        retry = target.get("RetryPolicy") or {}
        dlq = (target.get("DeadLetterConfig") or {}).get("Arn")
        if dlq:
            self.topology.dlqs.add(str(dlq).rsplit(":", 1)[-1])
        params: dict[str, Any] = {
            "Name": name,
            "GroupName": group,
            "ScheduleExpression": props["ScheduleExpression"],
            "FlexibleTimeWindow": props.get("FlexibleTimeWindow", {"Mode": "OFF"}),
            "State": props.get("State", "ENABLED"),
            "Target": {k: v for k, v in target.items() if v is not None},
        }
        if props.get("ScheduleExpressionTimezone"):
            params["ScheduleExpressionTimezone"] = props["ScheduleExpressionTimezone"]
        arn = self.scheduler.create_schedule(**params)["ScheduleArn"]
        self.topology.schedules.append(
            ScheduleSpec(
                name=name,
                arn=arn,
                expression=str(props["ScheduleExpression"]),
                timezone=str(props.get("ScheduleExpressionTimezone") or "UTC"),
                enabled=props.get("State", "ENABLED") == "ENABLED",
                target_arn=target_arn,
                source=str(bridge.get("Source", "")),
                detail_type=str(bridge.get("DetailType", "")),
                input=str(target.get("Input", "{}")),
                # Scheduler's defaults: 185 attempts over 24 hours.
                retry=RetryPolicy(
                    int(retry.get("MaximumRetryAttempts", 185)),
                    int(retry.get("MaximumEventAgeInSeconds", 86400)),
                ),
                dlq_arn=str(dlq) if dlq else None,
                role_arn=str(target.get("RoleArn", "")),
                queue_url=queue_url,
                message_group_id=str(group_id) if group_id else None,
            )
        )
        # The schedule calls its target (PutEvents or SendMessage) and its DLQ as this role: IAM applies.
        if target.get("RoleArn"):
            self.topology.iam.caller_roles[self.topology.schedules[-1].caller] = str(target["RoleArn"])
        return Physical(ref=name, attrs={"Arn": arn})

    def _connection(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        name = props.get("Name") or _generated_name(stack.name, logical_id)
        kind = str(props["AuthorizationType"])
        if kind != "API_KEY":
            raise Unresolved(f"connection {name}: only API_KEY connections are emulated (not {kind})")
        params: dict[str, Any] = {
            "Name": name,
            "AuthorizationType": kind,
            "AuthParameters": props["AuthParameters"],
        }
        if props.get("Description"):
            params["Description"] = props["Description"]
        arn = self.events.create_connection(**params)["ConnectionArn"]
        self.topology.connections[arn] = ConnectionSpec(name=name, arn=arn, authorization_type=kind)
        return Physical(ref=name, attrs={"Arn": arn, "SecretArn": ""})

    def _api_destination(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        name = props.get("Name") or _generated_name(stack.name, logical_id)
        params: dict[str, Any] = {
            "Name": name,
            "ConnectionArn": props["ConnectionArn"],
            "InvocationEndpoint": props["InvocationEndpoint"],
            "HttpMethod": props["HttpMethod"],
        }
        rate = props.get("InvocationRateLimitPerSecond")
        if rate is not None:
            params["InvocationRateLimitPerSecond"] = int(rate)
        arn = self.events.create_api_destination(**params)["ApiDestinationArn"]
        self.topology.api_destinations[arn] = ApiDestinationSpec(
            name=name,
            arn=arn,
            connection_arn=str(props["ConnectionArn"]),
            endpoint=str(props["InvocationEndpoint"]),
            method=str(props["HttpMethod"]).upper(),
            rate_limit_per_second=int(rate) if rate is not None else None,
        )
        return Physical(ref=name, attrs={"Arn": arn})

    def _rule(self, stack: Stack, logical_id: str, props: dict[str, Any]) -> Physical:
        name = props.get("Name") or _generated_name(stack.name, logical_id)
        bus = str(props.get("EventBusName", "default")).rsplit("/", 1)[-1]
        if "EventPattern" not in props:
            raise Unresolved(f"rule {name}: scheduled (ScheduleExpression) rules are not fired locally")
        pattern = props["EventPattern"]
        pattern = json.loads(pattern) if isinstance(pattern, str) else pattern
        state = str(props.get("State", "ENABLED"))
        arn = self.events.put_rule(
            Name=name, EventBusName=bus, EventPattern=json.dumps(pattern), State=state
        )["RuleArn"]
        rule = RuleSpec(name=name, arn=arn, event_bus=bus, pattern=pattern, enabled=state == "ENABLED")
        targets = props.get("Targets") or []
        for target in targets:
            retry = target.get("RetryPolicy") or {}
            dlq = (target.get("DeadLetterConfig") or {}).get("Arn")
            if dlq:
                self.topology.dlqs.add(str(dlq).rsplit(":", 1)[-1])
            if "InputTransformer" in target or "Input" in target:
                self.topology.skipped[f"rule target {name}/{target['Id']} input"] = (
                    "Input/InputTransformer are not applied locally; InputPath is"
                )
            rule.targets.append(
                TargetSpec(
                    target_id=str(target["Id"]),
                    arn=str(target["Arn"]),
                    input_path=target.get("InputPath"),
                    # EventBridge's defaults: 185 attempts over 24 hours.
                    retry=RetryPolicy(
                        int(retry.get("MaximumRetryAttempts", 185)),
                        int(retry.get("MaximumEventAgeInSeconds", 86400)),
                    ),
                    dlq_arn=str(dlq) if dlq else None,
                )
            )
        if targets:
            self.events.put_targets(Rule=name, EventBusName=bus, Targets=targets)
        self.topology.rules.append(rule)
        return Physical(ref=f"{bus}|{name}", attrs={"Arn": arn})


def resolve_dynamic_reference(match: re.Match[str], secretsmanager: Any) -> str:
    """The value of one ``{{resolve:secretsmanager:<id>:SecretString:<key>:<stage>:<version>}}``."""
    if match.group("service") != "secretsmanager":
        raise Unresolved(f"dynamic reference {{{{resolve:{match.group('service')}:...}}}} is not supported")
    body = match.group("body")
    # The secret id may itself be an ARN (which contains colons): split the fixed fields from the right.
    secret_id, fields = body, ["", "", "", ""]
    marker = body.find(":SecretString")
    if marker >= 0:
        secret_id = body[:marker]
        rest = body[marker + 1 :].split(":")
        fields = [*rest, "", "", "", ""][:4]
    _, json_key, stage, version = fields
    params: dict[str, Any] = {"SecretId": secret_id}
    if version:
        params["VersionId"] = version
    elif stage:
        params["VersionStage"] = stage
    try:
        secret = str(secretsmanager.get_secret_value(**params)["SecretString"])
    except Exception as exc:
        raise Unresolved(f"dynamic reference to secret {secret_id}: {exc}") from exc
    if json_key:
        return str(json.loads(secret)[json_key])
    return secret


def _dependency_order(resources: dict[str, dict[str, Any]], resolver: Resolver) -> list[str]:
    """Logical ids so every resource comes after those it references (Ref/GetAtt/Sub, DependsOn)."""
    deps: dict[str, set[str]] = {}
    for logical_id, resource in resources.items():
        depends_on = resource.get("DependsOn", [])
        if isinstance(depends_on, str):
            depends_on = [depends_on]
        deps[logical_id] = (resolver.dependencies(resource.get("Properties", {})) | set(depends_on)) & set(
            resources
        )
    ordered: list[str] = []
    done: set[str] = set()
    while len(ordered) < len(resources):
        ready = sorted(r for r in resources if r not in done and deps[r] <= done)
        if not ready:
            raise Unresolved(f"circular references between {sorted(set(resources) - done)}")
        ordered.extend(ready)
        done.update(ready)
    return ordered
