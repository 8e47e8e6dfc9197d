"""The connection and the discovery every ``python -m ops`` command uses.

``App(stage, region, endpoint_url)`` is one stage of Relay in one account and region (or in the local
sandbox). It finds the stage's resources by their physical names, ``relay-<stage>-<service>-<name>``
(``infra/constructs/naming.py``), which are the same on AWS and in the sandbox, so no command ever asks
for a queue URL or an ARN: a short name (``payments-payment-requests-dlq``) is enough.

    app = App("dev", "eu-west-1", None)             # AWS: region and credentials from the environment
    app = App("dev", None, "http://127.0.0.1:4566")  # the sandbox: its region and dummy credentials
    app.queues()        # every queue and DLQ, each with its redrive target (QueueInfo.dlq)
    app.find_queue("payment-requests-dlq", dlq=True)
    app.client("sqs")   # one cached boto3 client per service

What the local sandbox does not hold. The sandbox runs functions, event source mappings and alarms
outside its emulator (``emulator/provision.py`` records them for its own runtime and never creates them in
moto; ``.sandbox/state.json`` and the control server do not list them either), and it gives the queue
policies to its IAM enforcer instead of setting them on the queues. Against a loopback endpoint
``connect()`` therefore points ``App.templates`` at ``cdk.out`` (the assembly the sandbox provisioned
from), and ``functions()``, ``event_source_mappings()``, ``alarms()`` and ``queue_policy()`` read what
the templates declare when the emulator has nothing: every such item has ``source == "cdk.out"`` and the
commands say so. Alarms read this way have no state (nothing can fire them locally).

Region and credentials come from the AWS environment (``AWS_PROFILE``, ``AWS_REGION``...). Against a
loopback endpoint the region is the sandbox's ``us-east-1`` unless ``--region`` says otherwise (an
``AWS_REGION`` meant for a real account would otherwise find nothing), and the credentials are the
sandbox's dummy ones when the environment has none (as ``ops.seed_stock`` does).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_kms import KMSClient
    from mypy_boto3_lambda import LambdaClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_scheduler import EventBridgeSchedulerClient
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sts import STSClient
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_STAGE = "dev"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
SANDBOX_REGION = "us-east-1"  # emulator/server.py REGION: the sandbox provisions everything there
SANDBOX_STATE = ROOT / ".sandbox" / "state.json"
DEFAULT_TEMPLATES = ROOT / "cdk.out"
# Every DLQ the constructs make is named so: `<queue>-dlq` (ReliableQueue), `<topic>-undeliverable`
# (FanoutTopic), `outbox-stream-dlq` (OutboxPublisher), `<call>-schedule-dlq` / `<call>-target-dlq`
# (ScheduledApiCall). A queue some RedrivePolicy points at is a DLQ whatever its name.
DLQ_SUFFIXES = ("-dlq", "-undeliverable")
DECLARED = "cdk.out"  # the `source` of what was read from the templates instead of the emulator


class OpsError(Exception):
    """Something the operator must fix in the command line or the environment (exit code 2)."""


# -- what discovery returns ----------------------------------------------------------------------


@dataclass(frozen=True)
class QueueInfo:
    """One SQS queue of the stage, with its attributes as GetQueueAttributes returned them."""

    name: str
    url: str
    arn: str
    service: str
    is_dlq: bool
    dlq: QueueInfo | None  # the redrive target (RedrivePolicy.deadLetterTargetArn), when it exists
    max_receive_count: int | None
    visibility_timeout: int
    fifo: bool
    short: str = ""  # the name without `relay-<stage>-`: `payments-payment-requests-dlq`
    sources: tuple[str, ...] = ()  # for a DLQ: the queues whose RedrivePolicy targets it (names)
    dlq_arn: str | None = None  # the RedrivePolicy target even when that queue does not exist
    attributes: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def visible(self) -> int:
        return int(self.attributes.get("ApproximateNumberOfMessages", 0))

    @property
    def in_flight(self) -> int:
        return int(self.attributes.get("ApproximateNumberOfMessagesNotVisible", 0))

    @property
    def delayed(self) -> int:
        return int(self.attributes.get("ApproximateNumberOfMessagesDelayed", 0))

    @property
    def policy(self) -> dict[str, Any] | None:
        """The queue policy set on the queue itself (None without one)."""
        text = self.attributes.get("Policy")
        return dict(json.loads(text)) if text else None

    @property
    def has_redrive_policy(self) -> bool:
        return bool(self.attributes.get("RedrivePolicy"))


@dataclass(frozen=True)
class TableInfo:
    name: str
    arn: str
    service: str
    short: str
    stream_arn: str | None
    status: str


@dataclass(frozen=True)
class TopicInfo:
    name: str
    arn: str
    service: str
    short: str
    attributes: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class SubscriptionInfo:
    arn: str  # "PendingConfirmation" while unconfirmed (what ListSubscriptionsByTopic shows)
    topic: TopicInfo
    protocol: str
    endpoint: str  # the queue ARN for SQS
    pending: bool
    raw_delivery: bool
    filter_policy: dict[str, Any] | None
    dlq_arn: str | None  # the subscription's own DLQ (RedrivePolicy): what SNS could not deliver
    attributes: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class FunctionInfo:
    name: str
    arn: str
    service: str
    timeout: int
    handler: str
    memory: int
    source: str = "lambda"  # or DECLARED
    environment: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class MappingInfo:
    """An event source mapping (an SQS queue or a DynamoDB stream feeding a function)."""

    uuid: str
    function_name: str
    source_arn: str
    state: str  # Enabled, Disabled, Creating, Updating...
    batch_size: int | None
    function_response_types: tuple[str, ...]
    max_concurrency: int | None
    on_failure_arn: str | None
    last_result: str | None = None
    source: str = "lambda"  # or DECLARED

    @property
    def enabled(self) -> bool:
        return self.state == "Enabled"

    @property
    def report_batch_item_failures(self) -> bool:
        return "ReportBatchItemFailures" in self.function_response_types

    @property
    def is_sqs(self) -> bool:
        return self.source_arn.startswith("arn:aws:sqs:")


@dataclass(frozen=True)
class AlarmInfo:
    name: str
    state: str | None  # OK, ALARM, INSUFFICIENT_DATA; None when declared only (the sandbox)
    reason: str
    metric_name: str | None
    namespace: str | None
    dimensions: Mapping[str, str]
    description: str
    updated_at: datetime | None = None
    source: str = "cloudwatch"  # or DECLARED


@dataclass(frozen=True)
class Declared:
    """What the synthesized templates declare that the sandbox's emulator does not hold."""

    functions: tuple[FunctionInfo, ...] = ()
    mappings: tuple[MappingInfo, ...] = ()
    alarms: tuple[AlarmInfo, ...] = ()
    queue_policies: Mapping[str, dict[str, Any]] = field(default_factory=dict)  # queue name -> document
    notes: tuple[str, ...] = ()


# -- the app ---------------------------------------------------------------------------------------


def is_loopback(endpoint_url: str | None) -> bool:
    return bool(endpoint_url) and urlsplit(endpoint_url).hostname in LOCAL_HOSTS


@dataclass(frozen=True)
class App:
    stage: str = DEFAULT_STAGE
    region: str | None = None
    endpoint_url: str | None = None
    # Where to read what the emulator does not hold (functions, mappings, alarms, queue policies):
    # `connect()` sets it to cdk.out against the sandbox. None on AWS: only the account's answers count.
    templates: Path | None = None
    _cache: dict[str, Any] = field(default_factory=dict, init=False, compare=False, repr=False)

    @property
    def prefix(self) -> str:
        return f"relay-{self.stage}"

    @property
    def is_local(self) -> bool:
        """Pointed at the local sandbox (a loopback endpoint)."""
        return is_loopback(self.endpoint_url)

    @property
    def effective_region(self) -> str:
        if self.region:
            return self.region
        if self.is_local:
            return SANDBOX_REGION
        region = self.client("sts").meta.region_name
        return str(region)

    def name(self, service: str, short: str) -> str:
        """The physical name of ``short`` in ``service``: ``relay-<stage>-<service>-<short>``."""
        return f"{self.prefix}-{service}-{short}"

    def describe(self) -> str:
        where = f"endpoint {self.endpoint_url}" if self.endpoint_url else "AWS"
        return f"{self.prefix} ({self.effective_region}, {where})"

    # clients -------------------------------------------------------------------------------------

    # Typed per service (boto3-stubs), so mypy checks every call ops makes.
    @overload
    def client(
        self, service: Literal["cloudformation"], *, max_attempts: int = 5
    ) -> CloudFormationClient: ...
    @overload
    def client(self, service: Literal["cloudwatch"], *, max_attempts: int = 5) -> CloudWatchClient: ...
    @overload
    def client(self, service: Literal["dynamodb"], *, max_attempts: int = 5) -> DynamoDBClient: ...
    @overload
    def client(self, service: Literal["events"], *, max_attempts: int = 5) -> EventBridgeClient: ...
    @overload
    def client(self, service: Literal["kms"], *, max_attempts: int = 5) -> KMSClient: ...
    @overload
    def client(self, service: Literal["lambda"], *, max_attempts: int = 5) -> LambdaClient: ...
    @overload
    def client(self, service: Literal["s3"], *, max_attempts: int = 5) -> S3Client: ...
    @overload
    def client(
        self, service: Literal["scheduler"], *, max_attempts: int = 5
    ) -> EventBridgeSchedulerClient: ...
    @overload
    def client(self, service: Literal["sns"], *, max_attempts: int = 5) -> SNSClient: ...
    @overload
    def client(self, service: Literal["sqs"], *, max_attempts: int = 5) -> SQSClient: ...
    @overload
    def client(self, service: Literal["sts"], *, max_attempts: int = 5) -> STSClient: ...
    def client(self, service: str, *, max_attempts: int = 5) -> Any:
        """One boto3 client per service for this app (standard retries; ``max_attempts`` fewer for a
        first call that should fail fast when the endpoint is down)."""
        key = f"client:{service}" if max_attempts == 5 else f"client:{service}:{max_attempts}"
        if key not in self._cache:
            import boto3
            from botocore.config import Config

            # (the stubs cannot type the **connection keywords)
            self._cache[key] = boto3.client(  # type: ignore[call-overload]
                service,
                endpoint_url=self.endpoint_url,
                config=Config(retries={"mode": "standard", "max_attempts": max_attempts}),
                **self._connection(),
            )
        return self._cache[key]

    def credentials(self) -> Any:
        """The credentials the clients sign with (boto3's default chain; the sandbox's dummy ones against
        a loopback endpoint when the environment has none), for requests boto3 does not make itself: a
        SigV4-signed call to an HTTP API (``ops.smoke``). Refreshable ones stay refreshable. Raises
        botocore's ``NoCredentialsError`` when there are none."""
        if "credentials" not in self._cache:
            import boto3
            from botocore.exceptions import NoCredentialsError

            # (the stubs cannot type the **connection keywords)
            credentials = boto3.Session(**self._connection()).get_credentials()  # type: ignore[arg-type]
            if credentials is None:
                raise NoCredentialsError()
            self._cache["credentials"] = credentials
        return self._cache["credentials"]

    def _connection(self) -> dict[str, str]:
        """Region and credentials: the AWS environment's; against the sandbox its region and its dummy
        credentials when the environment has none (ops.seed_stock's rule)."""
        options: dict[str, str] = {}
        if self.region:
            options["region_name"] = self.region
        if self.is_local:
            options.setdefault("region_name", SANDBOX_REGION)
            env = os.environ
            if not env.get("AWS_ACCESS_KEY_ID") and not env.get("AWS_PROFILE"):
                options.update(aws_access_key_id="testing", aws_secret_access_key="testing")  # noqa: S106
        return options

    def caller(self) -> str:
        """Who is calling (STS GetCallerIdentity), for the audit records."""
        return str(self.client("sts").get_caller_identity()["Arn"])

    # names -----------------------------------------------------------------------------------------

    def _owned(self, name: str) -> bool:
        return name.startswith(f"{self.prefix}-")

    def _short(self, name: str) -> str:
        return name[len(self.prefix) + 1 :] if self._owned(name) else name

    def _service(self, name: str) -> str:
        return self._short(name).split("-", 1)[0]

    # queues ----------------------------------------------------------------------------------------

    def queues(self) -> list[QueueInfo]:
        """Every queue named ``relay-<stage>-*`` (ListQueues by prefix), DLQs included, by name. Reads
        attributes only: nothing is received."""
        sqs = self.client("sqs")
        urls: list[str] = []
        request: dict[str, Any] = {"QueueNamePrefix": f"{self.prefix}-", "MaxResults": 1000}
        while True:
            page = sqs.list_queues(**request)
            urls.extend(page.get("QueueUrls", []))
            if not page.get("NextToken"):
                break
            request["NextToken"] = page["NextToken"]
        found: dict[str, dict[str, str]] = {}
        for url in urls:
            name = url.rstrip("/").rsplit("/", 1)[-1]
            if not self._owned(name):
                continue
            try:
                attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
            except sqs.exceptions.QueueDoesNotExist:
                continue  # deleted between the list and the read
            found[url] = {str(k): str(v) for k, v in attributes.items()}
        return self._queue_infos(found)

    def _queue_infos(self, found: Mapping[str, Mapping[str, str]]) -> list[QueueInfo]:
        redrive: dict[str, dict[str, Any]] = {}
        sources: dict[str, list[str]] = {}
        for url, attributes in found.items():
            text = attributes.get("RedrivePolicy")
            if text:
                policy = dict(json.loads(text))
                redrive[url] = policy
                target = str(policy.get("deadLetterTargetArn", "")).rsplit(":", 1)[-1]
                sources.setdefault(target, []).append(url.rstrip("/").rsplit("/", 1)[-1])
        base: dict[str, QueueInfo] = {}
        for url, attributes in found.items():
            name = url.rstrip("/").rsplit("/", 1)[-1]
            policy = redrive.get(url) or {}
            base[name] = QueueInfo(
                name=name,
                url=url,
                arn=attributes.get("QueueArn", ""),
                service=self._service(name),
                is_dlq=name in sources or name.removesuffix(".fifo").endswith(DLQ_SUFFIXES),
                dlq=None,
                max_receive_count=int(policy["maxReceiveCount"]) if "maxReceiveCount" in policy else None,
                visibility_timeout=int(attributes.get("VisibilityTimeout", 30)),
                fifo=attributes.get("FifoQueue") == "true" or name.endswith(".fifo"),
                short=self._short(name),
                sources=tuple(sorted(sources.get(name, ()))),
                dlq_arn=str(policy["deadLetterTargetArn"]) if "deadLetterTargetArn" in policy else None,
                attributes=dict(attributes),
            )
        by_arn = {q.arn: q for q in base.values()}
        infos = [
            replace(q, dlq=by_arn.get(q.dlq_arn)) if q.dlq_arn and q.dlq_arn in by_arn else q
            for q in base.values()
        ]
        return sorted(infos, key=lambda q: q.name)

    def find_queue(self, text: str, *, dlq: bool | None = None) -> QueueInfo:
        """The one queue ``text`` names: its full name, its short name (``payments-payment-requests-dlq``),
        its name within its service (``payment-requests-dlq``), or an unambiguous prefix or suffix of the
        short name. ``dlq=True`` looks among the DLQs only, ``False`` among the other queues. Raises
        OpsError listing the candidates when none or several match."""
        what = {True: "DLQ", False: "queue", None: "queue"}[dlq]
        candidates = [q for q in self.queues() if dlq is None or q.is_dlq == dlq]
        if not candidates:
            raise OpsError(
                f"no {what}s named {self.prefix}-* in {self.effective_region}"
                + (f" at {self.endpoint_url}" if self.endpoint_url else "")
                + " (is the stage deployed, or the sandbox running? --stage, --region, --endpoint-url)"
            )
        wanted = text.strip()
        for matches in (
            [q for q in candidates if wanted in (q.name, q.short, q.url, q.arn)],
            [q for q in candidates if q.short.split("-", 1)[-1] == wanted],
            [q for q in candidates if q.short.startswith(wanted) or q.short.endswith(wanted)],
        ):
            if len(matches) == 1:
                return matches[0]
            if len(matches) > 1:
                names = ", ".join(q.short for q in matches)
                raise OpsError(f"{wanted!r} matches {len(matches)} {what}s: {names}; say which")
        names = ", ".join(q.short for q in candidates)
        raise OpsError(f"no {what} matches {wanted!r}; the {what}s of {self.prefix} are: {names}")

    def queue_policy(self, queue: QueueInfo) -> tuple[dict[str, Any] | None, str]:
        """The queue's policy and where it was read: ``"sqs"`` (set on the queue), ``DECLARED`` (the
        sandbox, which hands policies to its IAM enforcer instead of the queue), or ``"none"``."""
        live = queue.policy
        if live is not None:
            return live, "sqs"
        if self.templates is not None:
            declared = self.declared().queue_policies.get(queue.name)
            if declared is not None:
                return declared, DECLARED
        return None, "none"

    # tables, topics, subscriptions -----------------------------------------------------------

    def tables(self) -> list[TableInfo]:
        ddb = self.client("dynamodb")
        names: list[str] = []
        request: dict[str, Any] = {}
        while True:
            page = ddb.list_tables(**request)
            names.extend(n for n in page.get("TableNames", []) if self._owned(n))
            if not page.get("LastEvaluatedTableName"):
                break
            request["ExclusiveStartTableName"] = page["LastEvaluatedTableName"]
        tables = []
        for name in sorted(names):
            table = ddb.describe_table(TableName=name)["Table"]
            tables.append(
                TableInfo(
                    name=name,
                    arn=str(table.get("TableArn", "")),
                    service=self._service(name),
                    short=self._short(name),
                    stream_arn=table.get("LatestStreamArn"),
                    status=str(table.get("TableStatus", "")),
                )
            )
        return tables

    def topics(self) -> list[TopicInfo]:
        sns = self.client("sns")
        topics = []
        for page in sns.get_paginator("list_topics").paginate():
            for entry in page.get("Topics", []):
                arn = str(entry["TopicArn"])
                name = arn.rsplit(":", 1)[-1]
                if not self._owned(name):
                    continue
                attributes = sns.get_topic_attributes(TopicArn=arn).get("Attributes", {})
                topics.append(
                    TopicInfo(
                        name=name,
                        arn=arn,
                        service=self._service(name),
                        short=self._short(name),
                        attributes={str(k): str(v) for k, v in attributes.items()},
                    )
                )
        return sorted(topics, key=lambda t: t.name)

    def subscriptions(self) -> list[SubscriptionInfo]:
        """Every subscription to the stage's topics, with the attributes SNS delivers by."""
        sns = self.client("sns")
        found = []
        for topic in self.topics():
            for page in sns.get_paginator("list_subscriptions_by_topic").paginate(TopicArn=topic.arn):
                for entry in page.get("Subscriptions", []):
                    arn = str(entry.get("SubscriptionArn", ""))
                    attributes: dict[str, str] = {}
                    if arn.startswith("arn:"):  # "PendingConfirmation" cannot be asked about
                        raw = sns.get_subscription_attributes(SubscriptionArn=arn).get("Attributes", {})
                        attributes = {str(k): str(v) for k, v in raw.items()}
                    pending = arn == "PendingConfirmation" or _true(attributes.get("PendingConfirmation"))
                    policy = attributes.get("FilterPolicy")
                    redrive = attributes.get("RedrivePolicy")
                    found.append(
                        SubscriptionInfo(
                            arn=arn,
                            topic=topic,
                            protocol=str(entry.get("Protocol", "")),
                            endpoint=str(entry.get("Endpoint", "")),
                            pending=pending,
                            raw_delivery=_true(attributes.get("RawMessageDelivery")),
                            filter_policy=dict(json.loads(policy)) if policy else None,
                            dlq_arn=str(json.loads(redrive).get("deadLetterTargetArn")) if redrive else None,
                            attributes=attributes,
                        )
                    )
        return found

    # functions, mappings, alarms -------------------------------------------------------------

    def functions(self) -> list[FunctionInfo]:
        """The stage's Lambda functions (ListFunctions, by name prefix); in the sandbox, where no
        function is in the emulator, the ones the templates declare (``source == "cdk.out"``)."""
        lam = self.client("lambda")
        found = []
        for page in lam.get_paginator("list_functions").paginate():
            for fn in page.get("Functions", []):
                name = str(fn["FunctionName"])
                if self._owned(name):
                    found.append(
                        FunctionInfo(
                            name=name,
                            arn=str(fn.get("FunctionArn", "")),
                            service=self._service(name),
                            timeout=int(fn.get("Timeout", 3)),
                            handler=str(fn.get("Handler", "")),
                            memory=int(fn.get("MemorySize", 128)),
                            environment=dict((fn.get("Environment") or {}).get("Variables") or {}),
                        )
                    )
        if not found and self.templates is not None:
            return list(self.declared().functions)
        return sorted(found, key=lambda f: f.name)

    def event_source_mappings(self) -> list[MappingInfo]:
        """The mappings feeding the stage's functions (ListEventSourceMappings); in the sandbox, which
        runs them outside the emulator, the ones the templates declare (``source == "cdk.out"``)."""
        lam = self.client("lambda")
        found = []
        for page in lam.get_paginator("list_event_source_mappings").paginate():
            for esm in page.get("EventSourceMappings", []):
                function = _function_name(str(esm.get("FunctionArn", "")))
                if not self._owned(function):
                    continue
                on_failure = (esm.get("DestinationConfig") or {}).get("OnFailure", {}).get("Destination")
                found.append(
                    MappingInfo(
                        uuid=str(esm.get("UUID", "")),
                        function_name=function,
                        source_arn=str(esm.get("EventSourceArn", "")),
                        state=str(esm.get("State", "")),
                        batch_size=esm.get("BatchSize"),
                        function_response_types=tuple(esm.get("FunctionResponseTypes") or ()),
                        max_concurrency=(esm.get("ScalingConfig") or {}).get("MaximumConcurrency"),
                        on_failure_arn=str(on_failure) if on_failure else None,
                        last_result=esm.get("LastProcessingResult"),
                    )
                )
        if not found and self.templates is not None:
            return list(self.declared().mappings)
        return sorted(found, key=lambda m: (m.function_name, m.source_arn))

    def functions_by_name(self) -> dict[str, FunctionInfo]:
        return {f.name: f for f in self.functions()}

    def alarms(self, *, state: str | None = None) -> list[AlarmInfo]:
        """The stage's CloudWatch alarms (DescribeAlarms by name prefix; CloudFormation names them
        ``<stack>-<logical id>-<suffix>``), optionally only those in ``state`` ("ALARM"). In the
        sandbox, which does not emulate alarms, the declared ones, with no state."""
        cw = self.client("cloudwatch")
        request: dict[str, Any] = {"AlarmNamePrefix": f"{self.prefix}-", "AlarmTypes": ["MetricAlarm"]}
        if state:
            request["StateValue"] = state
        found = []
        for page in cw.get_paginator("describe_alarms").paginate(**request):
            for alarm in page.get("MetricAlarms", []):
                if state and alarm.get("StateValue") != state:
                    continue  # (some emulators apply only one of the filters)
                found.append(
                    AlarmInfo(
                        name=str(alarm["AlarmName"]),
                        state=str(alarm.get("StateValue", "")),
                        reason=str(alarm.get("StateReason", "")),
                        metric_name=alarm.get("MetricName"),
                        namespace=alarm.get("Namespace"),
                        dimensions={str(d["Name"]): str(d["Value"]) for d in alarm.get("Dimensions", [])},
                        description=str(alarm.get("AlarmDescription", "")),
                        updated_at=alarm.get("StateUpdatedTimestamp"),
                    )
                )
        if not found and self.templates is not None and self.alarms_declared_only():
            declared = list(self.declared().alarms)
            return [] if state else declared
        return sorted(found, key=lambda a: a.name)

    def alarms_declared_only(self) -> bool:
        """True in the sandbox: its alarms exist only in the templates (nothing emits metrics)."""
        if self.templates is None:
            return False
        cw = self.client("cloudwatch")
        return not cw.describe_alarms(AlarmNamePrefix=f"{self.prefix}-", MaxRecords=1).get("MetricAlarms")

    # the templates -------------------------------------------------------------------------------

    def declared(self) -> Declared:
        """What ``templates`` declares for this stage (read once per App)."""
        if "declared" not in self._cache:
            if self.templates is None or not (self.templates / "manifest.json").is_file():
                self._cache["declared"] = Declared(notes=(f"no synthesized templates at {self.templates}",))
            else:
                self._cache["declared"] = read_declared(self.templates, self.prefix)
        declared: Declared = self._cache["declared"]
        return declared


def _true(value: Any) -> bool:
    return str(value).lower() == "true"


def _function_name(arn: str) -> str:
    """``arn:aws:lambda:r:a:function:name[:qualifier]`` -> ``name``."""
    if ":function:" in arn:
        return arn.split(":function:", 1)[1].split(":", 1)[0]
    return arn


# -- reading the templates (the sandbox) ---------------------------------------------------------


def read_declared(cdk_out: Path, prefix: str) -> Declared:
    """Functions, SQS/stream mappings, alarms and queue policies as the stage's templates declare them,
    named as the sandbox names them (``emulator.provision``: a resource without a name property is
    ``<stack>-<logical id>``), references resolved with the sandbox's own resolver."""
    from emulator.server import ACCOUNT_ID, REGION
    from emulator.templates import Physical, Resolver, Unresolved, load_stacks

    functions: list[FunctionInfo] = []
    mappings: list[MappingInfo] = []
    alarms: list[AlarmInfo] = []
    policies: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    exports: dict[str, Any] = {}

    def physical(stack: str, logical: str, resource: Mapping[str, Any]) -> Physical:
        kind = str(resource.get("Type", ""))
        props = resource.get("Properties", {}) or {}

        def named(key: str, limit: int = 64) -> str:
            value = props.get(key)
            return value if isinstance(value, str) else f"{stack}-{logical}"[:limit]

        if kind == "AWS::SQS::Queue":
            name = named("QueueName", 80)
            if props.get("FifoQueue") and not name.endswith(".fifo"):
                name += ".fifo"
            arn = f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{name}"
            url = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT_ID}/{name}"
            return Physical(ref=url, attrs={"Arn": arn, "QueueName": name, "QueueUrl": url})
        if kind == "AWS::SNS::Topic":
            name = named("TopicName", 256)
            arn = f"arn:aws:sns:{REGION}:{ACCOUNT_ID}:{name}"
            return Physical(ref=arn, attrs={"TopicArn": arn, "TopicName": name})
        if kind == "AWS::Lambda::Function":
            name = named("FunctionName")
            return Physical(ref=name, attrs={"Arn": f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{name}"})
        if kind == "AWS::DynamoDB::Table":
            name = named("TableName", 255)
            arn = f"arn:aws:dynamodb:{REGION}:{ACCOUNT_ID}:table/{name}"
            return Physical(ref=name, attrs={"Arn": arn, "StreamArn": f"{arn}/stream/declared"})
        if kind == "AWS::Events::Rule":
            name = named("Name")
            # A rule on a custom bus: CloudFormation's Ref is "<bus>|<rule>" and its ARN
            # ".../rule/<bus>/<rule>" (the alarms on its metrics split the Ref to get the rule's name).
            bus = props.get("EventBusName")
            if isinstance(bus, Mapping) and isinstance(bus.get("Fn::ImportValue"), str):
                bus = exports.get(bus["Fn::ImportValue"])
            if isinstance(bus, str) and bus not in ("", "default"):
                arn = f"arn:aws:events:{REGION}:{ACCOUNT_ID}:rule/{bus}/{name}"
                return Physical(ref=f"{bus}|{name}", attrs={"Arn": arn})
            return Physical(ref=name, attrs={"Arn": f"arn:aws:events:{REGION}:{ACCOUNT_ID}:rule/{name}"})
        name = f"{stack}-{logical}"
        service = kind.split("::")[1].lower() if kind.count("::") == 2 else "unknown"
        return Physical(ref=name, attrs={"Arn": f"arn:aws:{service}:{REGION}:{ACCOUNT_ID}:{logical}"})

    for stack in load_stacks(cdk_out):
        resources = stack.resources
        table = {lid: physical(stack.name, lid, r) for lid, r in resources.items()}
        resolver = Resolver(stack, table, exports)
        for output in stack.outputs.values():
            export = output.get("Export", {}).get("Name")
            if export:
                try:
                    exports[export] = resolver.resolve(output["Value"])
                except Unresolved:
                    pass
        if not stack.name.startswith(f"{prefix}-"):
            continue
        service = stack.name[len(prefix) + 1 :]
        for logical, resource in resources.items():
            kind = resource.get("Type")
            try:
                props = resolver.resolve(resource.get("Properties", {}) or {})
            except Unresolved as exc:
                notes.append(f"{stack.name}/{logical}: {exc}")
                continue
            if kind == "AWS::Lambda::Function":
                name = table[logical].ref
                functions.append(
                    FunctionInfo(
                        name=name,
                        arn=str(table[logical].attrs["Arn"]),
                        service=service,
                        timeout=int(props.get("Timeout", 3)),
                        handler=str(props.get("Handler", "")),
                        memory=int(props.get("MemorySize", 128)),
                        source=DECLARED,
                        environment={
                            str(k): str(v)
                            for k, v in ((props.get("Environment") or {}).get("Variables") or {}).items()
                        },
                    )
                )
            elif kind == "AWS::Lambda::EventSourceMapping":
                on_failure = (props.get("DestinationConfig") or {}).get("OnFailure", {}).get("Destination")
                mappings.append(
                    MappingInfo(
                        uuid=f"{stack.name}/{logical}",
                        function_name=_function_name(str(props.get("FunctionName", ""))),
                        source_arn=str(props.get("EventSourceArn", "")),
                        state="Enabled" if props.get("Enabled", True) else "Disabled",
                        batch_size=props.get("BatchSize"),
                        function_response_types=tuple(props.get("FunctionResponseTypes") or ()),
                        max_concurrency=(props.get("ScalingConfig") or {}).get("MaximumConcurrency"),
                        on_failure_arn=str(on_failure) if on_failure else None,
                        source=DECLARED,
                    )
                )
            elif kind == "AWS::CloudWatch::Alarm":
                alarms.append(
                    AlarmInfo(
                        name=str(props.get("AlarmName") or f"{stack.name}-{logical}"),
                        state=None,
                        reason="declared in cdk.out; the sandbox does not emulate alarms",
                        metric_name=props.get("MetricName"),
                        namespace=props.get("Namespace"),
                        dimensions={str(d["Name"]): str(d["Value"]) for d in props.get("Dimensions", [])},
                        description=str(props.get("AlarmDescription", "")),
                        source=DECLARED,
                    )
                )
            elif kind == "AWS::SQS::QueuePolicy":
                for url in props.get("Queues", []):
                    name = str(url).rstrip("/").rsplit("/", 1)[-1]
                    document = policies.setdefault(name, {"Version": "2012-10-17", "Statement": []})
                    statements = props.get("PolicyDocument", {}).get("Statement", [])
                    document["Statement"].extend(statements if isinstance(statements, list) else [statements])
    return Declared(
        functions=tuple(sorted(functions, key=lambda f: f.name)),
        mappings=tuple(sorted(mappings, key=lambda m: (m.function_name, m.source_arn))),
        alarms=tuple(sorted(alarms, key=lambda a: a.name)),
        queue_policies=policies,
        notes=tuple(notes),
    )


# -- the command line ------------------------------------------------------------------------------


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """--stage, --region, --endpoint-url, --local: where the stage is."""
    group = parser.add_argument_group("where")
    group.add_argument("--stage", default=DEFAULT_STAGE, help=f"the stage (default {DEFAULT_STAGE})")
    group.add_argument(
        "--region", help="AWS region (default: the AWS environment's; the sandbox's us-east-1)"
    )
    group.add_argument(
        "--endpoint-url",
        help="an emulator endpoint instead of AWS, e.g. the sandbox's http://127.0.0.1:4566 "
        "(dummy credentials unless the environment has some)",
    )
    group.add_argument(
        "--local",
        action="store_true",
        help="the running sandbox (`make local`): its endpoint from .sandbox/state.json",
    )


def connect(args: argparse.Namespace) -> App:
    """The App the parsed connection arguments name."""
    endpoint = getattr(args, "endpoint_url", None)
    if getattr(args, "local", False):
        if endpoint:
            raise OpsError("--local and --endpoint-url name two places; give one")
        endpoint = sandbox_endpoint()
    templates = DEFAULT_TEMPLATES if is_loopback(endpoint) else None
    return App(stage=args.stage, region=args.region, endpoint_url=endpoint, templates=templates)


def sandbox_endpoint(state_file: Path = SANDBOX_STATE) -> str:
    """The emulator endpoint of the running sandbox, from the state file it writes at start."""
    try:
        state = json.loads(state_file.read_text())
    except FileNotFoundError:
        raise OpsError(
            f"no sandbox is running ({state_file.relative_to(ROOT)} is missing): start one with `make "
            "local`, or give --endpoint-url"
        ) from None
    except ValueError as exc:
        raise OpsError(f"{state_file}: not JSON ({exc})") from None
    endpoint = state.get("endpoint")
    if not isinstance(endpoint, str) or not endpoint:
        raise OpsError(f"{state_file} names no emulator endpoint")
    return endpoint
