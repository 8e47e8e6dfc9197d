"""What IAM authorizes for one AWS request: its actions and resource ARNs, read off the wire.

A request can need several authorizations: a ``TransactWriteItems`` needs ``dynamodb:PutItem`` /
``UpdateItem`` / ``DeleteItem`` / ``ConditionCheckItem`` on each table its items touch, a
``BatchWriteItem`` ``dynamodb:BatchWriteItem`` on each table, an S3 copy ``s3:GetObject`` on the source
too, a DLQ redrive (``StartMessageMoveTask``) the receive and delete actions on the DLQ and
``sqs:SendMessage`` on each destination. Each is a ``Check``; the request proceeds only if every check
is allowed. A request the sandbox cannot map is an ``Unmodelled`` error, so that a new call fails loudly
here instead of passing a check it was never given.

The service comes from the SigV4 credential scope (``Credential=AKID/date/region/<service>/aws4_request``),
the operation from the protocol: ``X-Amz-Target`` for the JSON services (DynamoDB, Streams, SQS, Secrets
Manager, KMS, EventBridge), ``Action=`` for the query services (SNS, STS, CloudWatch), method and path
for S3 (path-style, as boto3 addresses a custom endpoint) and for X-Ray's OTLP traces endpoint
(``POST /v1/traces``, which AWS authorizes as ``xray:PutTraceSegments``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit
from xml.etree import ElementTree

# Actions every principal may call without a grant.
UNAUTHORIZED_ACTIONS = frozenset({"sts:GetCallerIdentity"})


class Unmodelled(ValueError):
    """The sandbox does not know which IAM actions and resources this request needs."""


@dataclass(frozen=True)
class Check:
    action: str  # "dynamodb:PutItem"
    resource: str  # an ARN, or "*"
    operation: str  # the API operation, for the denial message ("TransactWriteItems")


@dataclass(frozen=True)
class Request:
    service: str  # the SigV4 signing name
    method: str
    path: str  # URL-decoded path
    query: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    region: str
    account: str


def _json(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(request.body or b"{}")
    except ValueError as exc:
        raise Unmodelled(f"{request.service} request body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise Unmodelled(f"{request.service} request body is not a JSON object")
    return body


def _target(request: Request) -> str:
    target = request.headers.get("x-amz-target", "")
    if "." not in target:
        raise Unmodelled(f"{request.service} request without X-Amz-Target")
    return target.rsplit(".", 1)[1]


def _arn(request: Request, service: str, resource: str) -> str:
    return f"arn:aws:{service}:{request.region}:{request.account}:{resource}"


# -- DynamoDB ------------------------------------------------------------------------------------------

_TRANSACT_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}


def _table_arn(request: Request, name: str) -> str:
    return name if name.startswith("arn:") else _arn(request, "dynamodb", f"table/{name}")


def _dynamodb(request: Request) -> list[Check]:
    operation = _target(request)
    body = _json(request)
    if request.headers.get("x-amz-target", "").startswith("DynamoDBStreams_"):
        if operation == "ListStreams":
            return [Check("dynamodb:ListStreams", "*", operation)]
        arn = str(body.get("StreamArn") or str(body.get("ShardIterator", "")).split("|", 1)[0])
        if not arn:
            raise Unmodelled(f"DynamoDB Streams {operation} without a stream ARN")
        return [Check(f"dynamodb:{operation}", arn, operation)]
    if operation in ("TransactWriteItems", "TransactGetItems"):
        checks = []
        for item in body.get("TransactItems", []):
            for kind, op in item.items():
                if kind not in _TRANSACT_ACTIONS:
                    raise Unmodelled(f"{operation} item of kind {kind}")
                checks.append(
                    Check(
                        f"dynamodb:{_TRANSACT_ACTIONS[kind]}", _table_arn(request, op["TableName"]), operation
                    )
                )
        return checks
    if operation in ("BatchGetItem", "BatchWriteItem"):
        return [
            Check(f"dynamodb:{operation}", _table_arn(request, table), operation)
            for table in body.get("RequestItems", {})
        ]
    if operation in ("ListTables", "DescribeLimits", "DescribeEndpoints"):
        return [Check(f"dynamodb:{operation}", "*", operation)]
    table = body.get("TableName")
    if not table:
        raise Unmodelled(f"DynamoDB {operation} without TableName")
    resource = _table_arn(request, str(table))
    if body.get("IndexName"):
        resource = f"{resource}/index/{body['IndexName']}"
    return [Check(f"dynamodb:{operation}", resource, operation)]


# -- SQS (JSON protocol) -------------------------------------------------------------------------------

_SQS_BATCH = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}


def _queue_arn(request: Request, url: str) -> str:
    parts = urlsplit(url).path.strip("/").split("/")
    if len(parts) < 2:
        raise Unmodelled(f"SQS queue URL {url!r} has no account/name path")
    return f"arn:aws:sqs:{request.region}:{parts[-2]}:{parts[-1]}"


# DLQ redrive. Each operation needs more than its own action: the SQS Developer Guide ("Troubleshoot
# Amazon SQS dead-letter queue and DLQ redrive issues", AccessDenied) lists, on the DLQ (the task's
# source), the action plus ReceiveMessage, DeleteMessage and GetQueueAttributes (ListMessageMoveTasks:
# GetQueueAttributes only), and sqs:SendMessage on the destination queue. Without a DestinationArn the
# destinations are the DLQ's source queues (the queues whose RedrivePolicy targets it). kms:Decrypt /
# GenerateDataKey apply to KMS-encrypted queues only; the templates' queues use SSE-SQS.
_DRAIN = ("ReceiveMessage", "DeleteMessage", "GetQueueAttributes")
_MOVE_TASK_DLQ_ACTIONS = {
    "StartMessageMoveTask": ("StartMessageMoveTask", *_DRAIN),
    "CancelMessageMoveTask": ("CancelMessageMoveTask", *_DRAIN),
    "ListMessageMoveTasks": ("ListMessageMoveTasks", "GetQueueAttributes"),
}


def _task_handle_source(handle: Any) -> str:
    """The source queue ARN in a move task's handle: AWS's handle is base64 of
    ``{"taskId": ..., "sourceArn": ...}`` (``emulator.moto_patches`` makes them so too)."""
    try:
        source = json.loads(base64.b64decode(str(handle), validate=True))["sourceArn"]
    except (ValueError, TypeError, KeyError) as exc:  # binascii.Error is a ValueError
        raise Unmodelled(
            f"SQS CancelMessageMoveTask with a TaskHandle that is not a move task's: {exc}"
        ) from exc
    return str(source)


def _sqs_move_task(
    operation: str, body: dict[str, Any], dead_letter_sources: Callable[[str], list[str]]
) -> list[Check]:
    dlq = (
        _task_handle_source(body.get("TaskHandle"))
        if operation == "CancelMessageMoveTask"
        else body.get("SourceArn")
    )
    if not isinstance(dlq, str) or not dlq.startswith("arn:"):
        raise Unmodelled(f"SQS {operation} without a source queue ARN")
    checks = [Check(f"sqs:{action}", dlq, operation) for action in _MOVE_TASK_DLQ_ACTIONS[operation]]
    if operation == "StartMessageMoveTask":
        destination = body.get("DestinationArn")
        destinations = [str(destination)] if destination else dead_letter_sources(dlq)
        checks += [Check("sqs:SendMessage", arn, operation) for arn in destinations]
    return checks


def _sqs(request: Request, dead_letter_sources: Callable[[str], list[str]]) -> list[Check]:
    if "x-amz-target" not in request.headers:
        raise Unmodelled("SQS query-protocol request (botocore uses the JSON protocol)")
    operation = _target(request)
    body = _json(request)
    if operation in _MOVE_TASK_DLQ_ACTIONS:
        return _sqs_move_task(operation, body, dead_letter_sources)
    action = "sqs:" + _SQS_BATCH.get(operation, operation)
    if operation == "ListQueues":
        return [Check(action, "*", operation)]
    if operation == "GetQueueUrl":
        owner = str(body.get("QueueOwnerAWSAccountId") or request.account)
        return [Check(action, f"arn:aws:sqs:{request.region}:{owner}:{body.get('QueueName', '')}", operation)]
    if operation == "CreateQueue":
        return [Check(action, _arn(request, "sqs", str(body.get("QueueName", ""))), operation)]
    url = body.get("QueueUrl")
    if not url:
        raise Unmodelled(f"SQS {operation} without QueueUrl")
    return [Check(action, _queue_arn(request, str(url)), operation)]


# -- SNS (query protocol) ------------------------------------------------------------------------------


def _form(request: Request) -> dict[str, str]:
    fields = parse_qs(request.body.decode("utf-8", "replace"), keep_blank_values=True)
    fields.update(parse_qs(request.query, keep_blank_values=True))
    return {k: v[0] for k, v in fields.items()}


def _sns(request: Request) -> list[Check]:
    form = _form(request)
    operation = form.get("Action", "")
    if not operation:
        raise Unmodelled("SNS request without Action")
    action = "sns:" + ("Publish" if operation == "PublishBatch" else operation)
    if operation in ("ListTopics", "CreateTopic", "ListSubscriptions"):
        resource = "*" if operation != "CreateTopic" else _arn(request, "sns", form.get("Name", ""))
        return [Check(action, resource, operation)]
    arn = form.get("TopicArn") or form.get("TargetArn") or form.get("ResourceArn")
    if not arn:
        if operation in ("Unsubscribe", "GetSubscriptionAttributes", "SetSubscriptionAttributes"):
            arn = form.get("SubscriptionArn", "").rsplit(":", 1)[0]
        else:
            raise Unmodelled(f"SNS {operation} without a topic ARN")
    return [Check(action, arn, operation)]


# -- S3 (REST, path-style) -----------------------------------------------------------------------------

_S3_OBJECT_SUBRESOURCES = {
    ("GET", "tagging"): "GetObjectTagging",
    ("PUT", "tagging"): "PutObjectTagging",
    ("DELETE", "tagging"): "DeleteObjectTagging",
    ("GET", "acl"): "GetObjectAcl",
    ("PUT", "acl"): "PutObjectAcl",
    ("GET", "attributes"): "GetObjectAttributes",
    ("PUT", "retention"): "PutObjectRetention",
    ("PUT", "legal-hold"): "PutObjectLegalHold",
}


def _s3(request: Request) -> list[Check]:
    bucket, _, key = request.path.lstrip("/").partition("/")
    query = parse_qs(request.query, keep_blank_values=True)
    method = request.method
    if not bucket:
        return [Check("s3:ListAllMyBuckets", "*", "ListBuckets")]
    bucket_arn = f"arn:aws:s3:::{bucket}"
    if key:
        object_arn = f"{bucket_arn}/{key}"
        for (verb, sub), action in _S3_OBJECT_SUBRESOURCES.items():
            if method == verb and sub in query:
                return [Check(f"s3:{action}", object_arn, action)]
        versioned = "versionId" in query
        if method in ("GET", "HEAD"):
            operation = "HeadObject" if method == "HEAD" else "GetObject"
            return [Check("s3:GetObjectVersion" if versioned else "s3:GetObject", object_arn, operation)]
        if method in ("PUT", "POST"):
            checks = [Check("s3:PutObject", object_arn, "PutObject")]
            source = request.headers.get("x-amz-copy-source")
            if source:
                source_path = unquote(source.split("?", 1)[0]).lstrip("/")
                checks.append(Check("s3:GetObject", f"arn:aws:s3:::{source_path}", "CopyObject"))
            return checks
        if method == "DELETE":
            if "uploadId" in query:
                return [Check("s3:AbortMultipartUpload", object_arn, "AbortMultipartUpload")]
            action = "s3:DeleteObjectVersion" if versioned else "s3:DeleteObject"
            return [Check(action, object_arn, "DeleteObject")]
        raise Unmodelled(f"S3 {method} on an object")
    if method == "POST" and "delete" in query:
        try:
            root = ElementTree.fromstring(request.body)  # noqa: S314 -- the sandbox's own clients
        except ElementTree.ParseError as exc:
            raise Unmodelled(f"S3 DeleteObjects body: {exc}") from exc
        keys = [el.text or "" for el in root.iter() if el.tag.endswith("Key")]
        return [Check("s3:DeleteObject", f"{bucket_arn}/{k}", "DeleteObjects") for k in keys]
    if method in ("GET", "HEAD") and not (set(query) - {"list-type", "prefix", "delimiter", "max-keys",
                                                        "continuation-token", "start-after", "marker",
                                                        "encoding-type", "fetch-owner"}):  # fmt: skip
        return [Check("s3:ListBucket", bucket_arn, "HeadBucket" if method == "HEAD" else "ListObjects")]
    if method == "GET" and "versions" in query:
        return [Check("s3:ListBucketVersions", bucket_arn, "ListObjectVersions")]
    if method == "GET" and "location" in query:
        return [Check("s3:GetBucketLocation", bucket_arn, "GetBucketLocation")]
    raise Unmodelled(f"S3 {method} on bucket {bucket} with {sorted(query)}")


# -- JSON services whose resource is one named parameter ---------------------------------------------


def _secretsmanager(request: Request, secret_arn: Any) -> list[Check]:
    operation = _target(request)
    body = _json(request)
    if operation in ("ListSecrets", "GetRandomPassword", "BatchGetSecretValue", "CreateSecret"):
        return [Check(f"secretsmanager:{operation}", "*", operation)]
    secret_id = str(body.get("SecretId", ""))
    return [Check(f"secretsmanager:{operation}", secret_arn(secret_id) or secret_id, operation)]


def _kms(request: Request) -> list[Check]:
    operation = _target(request)
    key = str(_json(request).get("KeyId", ""))
    if not key:
        return [Check(f"kms:{operation}", "*", operation)]
    if not key.startswith("arn:"):
        key = _arn(request, "kms", key if key.startswith("alias/") else f"key/{key}")
    return [Check(f"kms:{operation}", key, operation)]


def _events(request: Request) -> list[Check]:
    operation = _target(request)
    body = _json(request)
    if operation == "PutEvents":
        buses = {str(e.get("EventBusName") or "default") for e in body.get("Entries", [])} or {"default"}
        return [
            Check(
                "events:PutEvents",
                b if b.startswith("arn:") else _arn(request, "events", f"event-bus/{b}"),
                operation,
            )
            for b in sorted(buses)
        ]
    raise Unmodelled(f"EventBridge {operation}")


def _query_service(prefix: str) -> Callable[[Request], list[Check]]:
    def checks(request: Request) -> list[Check]:
        operation = _form(request).get("Action", "")
        if not operation:
            raise Unmodelled(f"{prefix} request without Action")
        return [Check(f"{prefix}:{operation}", "*", operation)]

    return checks


def _xray(request: Request) -> list[Check]:
    # The OTLP endpoint is authorized as the segment API is (X-Ray developer guide, "Setting up bearer
    # token authentication for traces": "the OTLP traces endpoint, which is authorized as
    # xray:PutTraceSegments"); X-Ray has no resource-level permissions for it.
    if request.method == "POST" and request.path == "/v1/traces":
        return [Check("xray:PutTraceSegments", "*", "PutTraceSegments")]
    raise Unmodelled(f"X-Ray {request.method} {request.path}")


def checks_for(
    request: Request,
    *,
    secret_arn: Any = lambda _id: None,
    dead_letter_sources: Callable[[str], list[str]] = lambda _arn: [],
) -> list[Check]:
    """Every authorization ``request`` needs. ``secret_arn(id)`` resolves a secret name to its ARN;
    ``dead_letter_sources(dlq_arn)`` lists the ARNs of the queues whose redrive policy targets a DLQ."""
    service = request.service
    if service == "dynamodb":
        return _dynamodb(request)
    if service == "sqs":
        return _sqs(request, dead_letter_sources)
    if service == "sns":
        return _sns(request)
    if service == "s3":
        return _s3(request)
    if service == "secretsmanager":
        return _secretsmanager(request, secret_arn)
    if service == "kms":
        return _kms(request)
    if service == "events":
        return _events(request)
    if service == "sts":
        return _query_service("sts")(request)
    if service == "monitoring":
        return _query_service("cloudwatch")(request)
    if service == "xray":
        return _xray(request)
    raise Unmodelled(f"requests to the {service} service")
