"""Payments end to end through the local sandbox: real HTTP, real handlers, emulated AWS."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
import requests

from emulator.server import client
from local.sandbox import Sandbox
from relay.envelope import new_envelope
from tests.e2e import api

pytestmark = pytest.mark.e2e

TERMINAL = {"COMPLETED", "FAILED", "PAYMENT_UNRESOLVED", "INVOICE_FAILED", "CANCELLED"}


def payment(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "paymentId": f"pay-{uuid.uuid4().hex[:10]}",
        "amount": "42.10",
        "currency": "EUR",
        "payer": "alice",
        "payee": "relay-shop",
        "details": {},
    }
    body.update(overrides)
    return body


def post_payment(sb: Sandbox, body: dict[str, Any], key: str | None = None) -> requests.Response:
    headers = {"Idempotency-Key": key or uuid.uuid4().hex}
    return api.post(sb, "/payments", json=body, headers=headers)


def wait_terminal(sb: Sandbox, operation_id: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.time() + timeout
    view: dict[str, Any] = {}
    while time.time() < deadline:
        view = api.get(sb, f"/operations/{operation_id}").json()
        if view.get("status") in TERMINAL:
            return view
        time.sleep(0.5)
    raise AssertionError(f"operation {operation_id} not terminal after {timeout} s: {view}")


def queue_url(sb: Sandbox, suffix: str) -> str:
    return next(url for name, url in sb.topology.queues.items() if name.endswith(suffix))


def test_payment_is_accepted_with_202_and_completes(sandbox: Sandbox) -> None:
    response = post_payment(sandbox, payment())
    assert response.status_code == 202
    operation_id = response.json()["operationId"]
    assert response.headers["location"] == f"/operations/{operation_id}"
    view = wait_terminal(sandbox, operation_id)
    assert view["status"] == "COMPLETED"
    assert sandbox.legacy.charges_by_operation()[operation_id] == 1
    assert sandbox.invoices.invoices_by_operation()[operation_id] == 1


def test_same_idempotency_key_and_body_returns_the_same_operation(sandbox: Sandbox) -> None:
    body, key = payment(), uuid.uuid4().hex
    first = post_payment(sandbox, body, key)
    second = post_payment(sandbox, body, key)
    assert first.status_code == second.status_code == 202
    assert first.json()["operationId"] == second.json()["operationId"]


def test_invalid_payment_is_rejected_with_400_and_nothing_stored(sandbox: Sandbox) -> None:
    response = post_payment(sandbox, payment(amount="twelve"))
    assert response.status_code == 400
    assert "amount" in json.dumps(response.json())


def test_unknown_route_answers_404_like_api_gateway(sandbox: Sandbox) -> None:
    # No route matches, so no authorizer runs: 404 whether the request is signed or not.
    response = requests.get(f"{sandbox.api_url}/no-such-route", timeout=10)
    assert response.status_code == 404
    assert response.json() == {"message": "Not Found"}


def test_poison_message_is_parked_in_the_dlq_with_its_reason(sandbox: Sandbox) -> None:
    sqs = client("sqs", sandbox.endpoint)
    sqs.send_message(QueueUrl=queue_url(sandbox, "payment-requests"), MessageBody="{not json")
    dlq = queue_url(sandbox, "payment-requests-dlq")
    deadline = time.time() + 30
    while time.time() < deadline:
        messages = sqs.receive_message(
            QueueUrl=dlq, MessageAttributeNames=["All"], WaitTimeSeconds=1, MaxNumberOfMessages=10
        ).get("Messages", [])
        for message in messages:
            if message["Body"] == "{not json":
                attributes = message["MessageAttributes"]
                assert attributes["relay.errorClass"]["StringValue"]
                assert attributes["relay.errorMessage"]["StringValue"]
                return
    raise AssertionError("the poison message was not parked in the payment-requests DLQ within 30 s")


def test_duplicate_delivery_is_acknowledged_without_a_second_charge(sandbox: Sandbox) -> None:
    operation_id = post_payment(sandbox, payment()).json()["operationId"]
    assert wait_terminal(sandbox, operation_id)["status"] == "COMPLETED"
    view = api.get(sandbox, f"/operations/{operation_id}").json()
    # The PaymentRequested the API wrote into the operation, rebuilt: its eventId and content derive
    # from the operation, so this is the very event the worker already processed.
    envelope = new_envelope(
        "PaymentRequested",
        identity=[operation_id, "payment-requested"],
        ids={"operationId": operation_id, "paymentId": view["paymentId"]},
        payload={},
        correlation_id=operation_id,
    ).to_json()
    topic = next(arn for name, arn in sandbox.topology.topics.items() if name.endswith("payment-events"))
    # The same event delivered again, as SNS at-least-once delivery may do.
    client("sns", sandbox.endpoint).publish(
        TopicArn=topic,
        Message=envelope,
        MessageAttributes={"eventType": {"DataType": "String", "StringValue": "PaymentRequested"}},
    )
    time.sleep(6)  # two batching windows and an invocation
    assert sandbox.legacy.charges_by_operation()[operation_id] == 1
    assert api.get(sandbox, f"/operations/{operation_id}").json()["status"] == "COMPLETED"
