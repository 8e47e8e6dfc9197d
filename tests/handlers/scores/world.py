"""The scores stack on moto, provisioned from its template (``tests.handlers.stack_world``) with the
reports stack it imports the verifications table from: tables, snapshot queue with DLQ, API key
secret. Plus builders for HTTP API and authorizer events."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from relay.ddb import deserialize_item, serialize_item
from tests.builders import ACCOUNT, FakeContext, record_from_received, retry_copy, sqs_event
from tests.handlers.stack_world import StackWorld, aws, plan, provision

REGION = "us-east-1"
API_KEY = "k3y-" + "x" * 44
# The stack leaves the secret's name to CloudFormation; the tests name it so that one of them can
# point the authorizer at a secret that does not exist (by replacing "scores-api-key" in the ARN).
NAMES = {"API_KEY_SECRET_ARN": "relay-test-scores-api-key"}
_PLAN = plan("scores", names=tuple(NAMES.items()))
SCORES_TABLE = _PLAN.env()["SCORES_TABLE"]
VERIFICATIONS_TABLE = _PLAN.env()["VERIFICATIONS_TABLE"]
IDEMPOTENCY_TABLE = _PLAN.env()["IDEMPOTENCY_TABLE"]
SNAPSHOT_QUEUE = _PLAN.queue_for("scores.handlers.snapshot_worker.handler")


@dataclass
class ScoresWorld:
    ddb: Any
    sqs: Any
    secrets: Any
    queue_url: str
    queue_arn: str
    dlq_url: str
    secret_arn: str
    stack: StackWorld

    def env(self) -> dict[str, str]:
        """The functions' environment from the template (tables, queue, secret ARN)."""
        return self.stack.env()

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

    def retry_copy(self, *, attempt: int = 1, body: str | None = None) -> dict[str, Any]:
        """The one delayed copy the consumer re-sent to the snapshot queue to retry a transient failure
        (waiting out its DelaySeconds), asserted to be retry ``attempt`` (a copy of ``body`` if given)."""
        return retry_copy(self.sqs, self.queue_url, attempt=attempt, body=body)

    def parked(self) -> list[dict[str, Any]]:
        return list(
            self.sqs.receive_message(
                QueueUrl=self.dlq_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
            ).get("Messages", [])
        )


def create_world() -> ScoresWorld:
    """Call inside ``mock_aws``. The API key secret holds ``API_KEY`` (the stack generates one)."""
    stack = provision("scores", names=NAMES)
    queue = stack.consumers()[SNAPSHOT_QUEUE]
    secret_arn = stack.env()["API_KEY_SECRET_ARN"]
    secrets = aws("secretsmanager")
    secrets.put_secret_value(SecretId=secret_arn, SecretString=API_KEY)
    return ScoresWorld(
        aws("dynamodb"), aws("sqs"), secrets, queue.url, queue.arn, queue.dlq_url, secret_arn, stack
    )


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
    from scores.handlers import api

    response: dict[str, Any] = api.handler(event, FakeContext())
    return response


def body_of(response: Mapping[str, Any]) -> Any:
    return json.loads(response["body"])
