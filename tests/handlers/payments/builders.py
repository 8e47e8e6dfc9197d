"""Builders for the payments handler tests (events of the HTTP API, requests, deliveries)."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

from relay.envelope import Envelope
from tests.builders import (
    ACCOUNT,
    REGION,
    failed_ids,  # noqa: F401  (re-exported to the tests)
    sns_wrapped,
)
from tests.handlers.payments.pipeline import OPERATIONS_TABLE, Infrastructure, lambda_sqs_event


def payment_request(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "paymentId": f"pay-{uuid.uuid4().hex[:10]}",
        "orderId": "ord-42",
        "amount": "12.50",
        "currency": "EUR",
        "payer": "acct-payer-1",
        "payee": "acct-payee-9",
        "details": {"note": "invoice me", "lines": [{"sku": "A-1", "qty": 2}]},
    }
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not None}


def http_event(
    method: str,
    path: str,
    *,
    body: str | Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
    base64_encoded: bool = False,
    user: str = "tester",
) -> dict[str, Any]:
    """An API Gateway HTTP API (payload format 2.0) event, IAM-authorized (as IAM user ``user``)."""
    text = body if isinstance(body, str) or body is None else json.dumps(body)
    if text is not None and base64_encoded:
        text = base64.b64encode(text.encode()).decode()
    request_id = f"req-{uuid.uuid4().hex[:12]}"
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"content-type": "application/json", **{k.lower(): v for k, v in (headers or {}).items()}},
        "requestContext": {
            "accountId": ACCOUNT,
            "apiId": "payments-api",
            "authorizer": {"iam": {"accountId": ACCOUNT, "userArn": f"arn:aws:iam::{ACCOUNT}:user/{user}"}},
            "domainName": "payments-api.execute-api.us-east-1.amazonaws.com",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": "pytest",
            },
            "requestId": request_id,
            "routeKey": "$default",
            "stage": "$default",
            "time": "01/May/2024:10:00:00 +0000",
            "timeEpoch": int(time.time() * 1000),
        },
        "body": text,
        "isBase64Encoded": base64_encoded,
    }


def post_payment(
    body: Mapping[str, Any] | str, *, idempotency_key: str | None = None, user: str = "tester"
) -> dict[str, Any]:
    from payments.handlers import api

    headers = {"Idempotency-Key": idempotency_key} if idempotency_key is not None else {}
    return api.handler(http_event("POST", "/payments", body=body, headers=headers, user=user), _context())


def get_operation(operation_id: str) -> dict[str, Any]:
    from payments.handlers import api

    return api.handler(http_event("GET", f"/operations/{operation_id}"), _context())


def _context() -> Any:
    from tests.builders import FakeContext

    return FakeContext()


def body_of(response: Mapping[str, Any]) -> Any:
    return json.loads(response["body"])


def accepted_operation(body: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
    response = post_payment(body or payment_request(), **kwargs)
    assert response["statusCode"] == 202, response
    return str(body_of(response)["operationId"])


def produced_event(infra: Infrastructure, operation_id: str, event_type: str) -> Envelope:
    """The ONE ``event_type`` event the operation's writes produced (``Infrastructure.produced_events``:
    what the stream publisher publishes); two would be a step that announced itself twice."""
    found = [e for e in infra.produced_events(operation_id) if e.event_type == event_type]
    assert len(found) == 1, f"expected one {event_type} event produced by {operation_id}, got {len(found)}"
    return found[0]


def produced_types(infra: Infrastructure, operation_id: str) -> list[str]:
    """The types of every event the operation produced, sorted (duplicates kept)."""
    return sorted(e.event_type for e in infra.produced_events(operation_id))


def steps_of(infra: Infrastructure, operation_id: str) -> list[tuple[str, str]]:
    """The operation's history as (step, status) pairs, whatever its stored shape."""
    operation = infra.operation(operation_id)
    assert operation is not None
    return [(s.step, s.status) for s in operation.steps]


def lower_claim_check_threshold(monkeypatch: Any, threshold_bytes: int = 256) -> None:
    """Make every function claim-check documents above ``threshold_bytes`` into S3 (64 KB by default:
    a test's requests, results and invoice inputs all travel inline otherwise)."""
    from relay.wiring import reset_all

    monkeypatch.setenv("CLAIM_CHECK_THRESHOLD_BYTES", str(threshold_bytes))
    reset_all()


def set_item_attributes(infra: Infrastructure, operation_id: str, **values: Any) -> None:
    """Edit the operation item behind the services' back (time travel, tampering)."""
    from relay.ddb import serialize_item

    names = {f"#a{i}": name for i, name in enumerate(values)}
    infra.ddb.update_item(
        TableName=OPERATIONS_TABLE,
        Key={"pk": {"S": f"OPERATION#{operation_id}"}, "sk": {"S": "OPERATION"}},
        UpdateExpression="SET " + ", ".join(f"#a{i} = :v{i}" for i in range(len(values))),
        ExpressionAttributeNames=names,
        ExpressionAttributeValues=serialize_item({f":v{i}": v for i, v in enumerate(values.values())}),
    )


def deliver(infra: Infrastructure, queue: str, *bodies: str | Envelope, sns: bool = True) -> dict[str, Any]:
    """Send the bodies to the real (moto) queue and receive them: a Lambda SQS event with genuine
    receipt handles, so backoff, heartbeat and parking act on a real message."""
    q = infra.queues[queue]
    for body in bodies:
        text = body if isinstance(body, str) else (sns_wrapped(body) if sns else body.to_json())
        infra.sqs.send_message(QueueUrl=q.url, MessageBody=text)
    messages = infra.receive_all(q.url)
    assert len(messages) == len(bodies), f"sent {len(bodies)}, received {len(messages)}"
    return lambda_sqs_event(messages, q)


__all__ = [
    "REGION",
    "accepted_operation",
    "body_of",
    "deliver",
    "get_operation",
    "http_event",
    "post_payment",
]


def queued_event(infra: Infrastructure, queue: str, *, expect: int | None = None) -> dict[str, Any]:
    """Publish the events written since the last publish (stream -> publisher -> SNS -> filtered
    queues) and receive what reached ``queue`` as a Lambda SQS event."""
    from tests.handlers.payments.pipeline import Pump

    Pump(infra).publish_outbox()
    q = infra.queues[queue]
    messages = infra.receive_all(q.url)
    if expect is not None:
        assert len(messages) == expect, f"expected {expect} message(s) on {queue}, got {len(messages)}"
    return lambda_sqs_event(messages, q)


def message_ids(event: Mapping[str, Any]) -> list[str]:
    return [r["messageId"] for r in event["Records"]]
