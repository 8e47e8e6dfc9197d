"""What the scores stack deploys, on moto (tables, snapshot queue with DLQ, API key secret), the
reports' verifications table it reads, and builders for HTTP API and authorizer events."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import boto3

from relay.idempotency import deserialize_item, serialize_item
from tests.builders import ACCOUNT, FakeContext, record_from_received, sqs_event

REGION = "us-east-1"
SCORES_TABLE = "scores-scores"
VERIFICATIONS_TABLE = "reports-verifications"
IDEMPOTENCY_TABLE = "scores-idempotency"
SNAPSHOT_QUEUE = "snapshots"
API_KEY = "k3y-" + "x" * 44


@dataclass
class ScoresWorld:
    ddb: Any
    sqs: Any
    secrets: Any
    queue_url: str
    queue_arn: str
    dlq_url: str
    secret_arn: str

    def env(self) -> dict[str, str]:
        return {
            "SCORES_TABLE": SCORES_TABLE,
            "VERIFICATIONS_TABLE": VERIFICATIONS_TABLE,
            "IDEMPOTENCY_TABLE": IDEMPOTENCY_TABLE,
            "SNAPSHOT_QUEUE_URL": self.queue_url,
            "API_KEY_SECRET_ARN": self.secret_arn,
            "RELAY_QUEUE_URL": self.queue_url,
            "RELAY_DLQ_URL": self.dlq_url,
        }

    def add_verification(self, report_id: str, agent_id: str, status: str, checked_at: str) -> None:
        """A verification record as the reports verifier writes it (the attributes scores reads)."""
        self.ddb.put_item(
            TableName=VERIFICATIONS_TABLE,
            Item=serialize_item(
                {
                    "pk": f"REPORT#{report_id}",
                    "sk": "VERIFICATION",
                    "kind": "verification",
                    "reportId": report_id,
                    "agentId": agent_id,
                    "status": status,
                    "expectedSha256": "0" * 64,
                    "checkedAt": checked_at,
                    "attempts": 1,
                }
            ),
        )

    def snapshot(self, agent_id: str, hour: str) -> dict[str, Any] | None:
        item = self.ddb.get_item(
            TableName=SCORES_TABLE, Key={"pk": {"S": f"AGENT#{agent_id}"}, "sk": {"S": f"HOUR#{hour}"}}
        ).get("Item")
        return deserialize_item(item) if item else None

    def snapshots(self) -> list[dict[str, Any]]:
        items = self.ddb.scan(TableName=SCORES_TABLE)["Items"]
        return sorted((deserialize_item(i) for i in items), key=lambda i: (i["pk"], i["sk"]))

    def receive(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        while batch := self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=10,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", []):
            messages.extend(batch)
        return messages

    def lambda_event(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        return sqs_event(record_from_received(m, self.queue_arn) for m in messages)

    def parked(self) -> list[dict[str, Any]]:
        return list(
            self.sqs.receive_message(
                QueueUrl=self.dlq_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
            ).get("Messages", [])
        )


def _table(ddb: Any, name: str, keys: tuple[str, ...]) -> None:
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": k, "KeyType": t} for k, t in zip(keys, ("HASH", "RANGE"), strict=False)],
        AttributeDefinitions=[{"AttributeName": k, "AttributeType": "S"} for k in keys],
        BillingMode="PAY_PER_REQUEST",
    )


def create_world() -> ScoresWorld:
    """Call inside ``mock_aws``."""
    ddb = boto3.client("dynamodb", region_name=REGION)
    sqs = boto3.client("sqs", region_name=REGION)
    secrets = boto3.client("secretsmanager", region_name=REGION)
    _table(ddb, SCORES_TABLE, ("pk", "sk"))
    _table(ddb, VERIFICATIONS_TABLE, ("pk", "sk"))
    _table(ddb, IDEMPOTENCY_TABLE, ("id",))
    dlq_url = sqs.create_queue(QueueName=f"{SNAPSHOT_QUEUE}-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    queue_url = sqs.create_queue(
        QueueName=SNAPSHOT_QUEUE,
        Attributes={
            "VisibilityTimeout": "30",
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 5}),
        },
    )["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    secret_arn = secrets.create_secret(Name="scores-api-key", SecretString=API_KEY)["ARN"]
    return ScoresWorld(ddb, sqs, secrets, queue_url, queue_arn, dlq_url, secret_arn)


def http_event(
    method: str,
    path: str,
    *,
    body: str | Mapping[str, Any] | None = None,
    query: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """An API Gateway HTTP API (payload format 2.0) event."""
    from urllib.parse import urlencode

    text = body if isinstance(body, str) or body is None else json.dumps(body)
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": urlencode(query or {}),
        "headers": {"content-type": "application/json", **{k.lower(): v for k, v in (headers or {}).items()}},
        "requestContext": {
            "accountId": ACCOUNT,
            "apiId": "scores-api",
            "domainName": "scores-api.execute-api.us-east-1.amazonaws.com",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": "t",
            },
            "requestId": f"req-{uuid.uuid4().hex[:12]}",
            "routeKey": "$default",
            "stage": "$default",
            "time": "29/Nov/2026:10:00:00 +0000",
            "timeEpoch": int(time.time() * 1000),
        },
        "body": text,
        "isBase64Encoded": False,
    }
    if query:
        event["queryStringParameters"] = dict(query)
    return event


def authorizer_event(api_key: str | None) -> dict[str, Any]:
    """What API Gateway passes a REQUEST authorizer (payload format 2.0) for POST /score-snapshots."""
    headers = {"content-type": "application/json"}
    if api_key is not None:
        headers["x-api-key"] = api_key
    return {
        "version": "2.0",
        "type": "REQUEST",
        "routeArn": f"arn:aws:execute-api:{REGION}:{ACCOUNT}:abc123/$default/POST/score-snapshots",
        "identitySource": [api_key] if api_key is not None else [],
        "routeKey": "POST /score-snapshots",
        "rawPath": "/score-snapshots",
        "rawQueryString": "",
        "headers": headers,
        "requestContext": {
            "accountId": ACCOUNT,
            "apiId": "abc123",
            "http": {"method": "POST", "path": "/score-snapshots", "sourceIp": "203.0.113.9"},
            "requestId": f"req-{uuid.uuid4().hex[:12]}",
            "routeKey": "POST /score-snapshots",
            "stage": "$default",
        },
    }


def call_api(event: dict[str, Any]) -> dict[str, Any]:
    from scores import api

    response: dict[str, Any] = api.handler(event, FakeContext())
    return response


def body_of(response: Mapping[str, Any]) -> Any:
    return json.loads(response["body"])
