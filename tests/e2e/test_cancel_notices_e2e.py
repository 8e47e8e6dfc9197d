"""Cancellation and completion notices end to end in the sandbox: a PENDING operation cancelled over
HTTP is never charged and its order's client hears CANCELLED; a completed one's callback receives exactly
one notice whose Standard Webhooks signature verifies with the stack's key (the `standardwebhooks`
library's one call, as a receiver makes it), even when every notices batch is
delivered twice; a repeated cancel answers the same; a submitted one answers 409."""

from __future__ import annotations

import time
from typing import Any

import requests
from standardwebhooks.webhooks import Webhook

from local.sandbox import Sandbox
from tests.e2e import api
from tests.e2e.test_payments_e2e import payment, post_payment, wait_terminal


def cancel(sb: Sandbox, operation_id: str, reason: str | None = None) -> requests.Response:
    body = {"reason": reason} if reason else None
    return api.post(sb, f"/operations/{operation_id}/cancel", json=body)


def notices_of(sb: Sandbox, operation_id: str, timeout: float = 30) -> dict[str, int]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = sb.receiver.notices_by_key().get(f"{operation_id}:notice")
        if found:
            time.sleep(1)  # a second (wrong) notice would arrive within this
            return dict(sb.receiver.notices_by_key()[f"{operation_id}:notice"])
        time.sleep(0.3)
    raise AssertionError(f"no notice for {operation_id} within {timeout} s")


def callback(sb: Sandbox) -> str:
    return f"{sb.receiver.base_url}/e2e/notices"


def test_a_completed_payment_notifies_its_callback_once_validly_signed_under_duplicate_delivery(
    sandbox: Sandbox,
) -> None:
    with sandbox.delivering_twice("NoticeSender"):
        response = post_payment(sandbox, payment(callbackUrl=callback(sandbox)))
        assert response.status_code == 202, response.text
        operation_id = response.json()["operationId"]
        assert wait_terminal(sandbox, operation_id)["status"] == "COMPLETED"

        assert notices_of(sandbox, operation_id) == {"valid": 1}

    (delivery,) = [d for d in sandbox.receiver.deliveries() if d["key"] == f"{operation_id}:notice"]
    assert delivery["body"]["status"] == "COMPLETED" and delivery["body"]["operationId"] == operation_id
    key = sandbox.notice_signing_key()
    assert key is not None
    verified = Webhook("whsec_" + key.removeprefix("whsec_")).verify(
        delivery["raw"].encode(), delivery["headers"]
    )
    assert verified == delivery["body"]
    assert sandbox.legacy.charges_by_operation().get(operation_id) == 1


def test_a_pending_payment_cancelled_is_never_charged_and_its_callback_hears_cancelled(
    sandbox: Sandbox,
) -> None:
    with sandbox.paused("PaymentWorker"):
        response = post_payment(sandbox, payment(callbackUrl=callback(sandbox)))
        operation_id = response.json()["operationId"]

        first = cancel(sandbox, operation_id, "changed my mind")
        again = cancel(sandbox, operation_id, "changed my mind")

    assert first.status_code == 200, first.text
    assert first.json()["status"] == "CANCELLED"
    assert again.status_code == 200 and again.json() == first.json()
    assert notices_of(sandbox, operation_id) == {"valid": 1}
    (delivery,) = [d for d in sandbox.receiver.deliveries() if d["key"] == f"{operation_id}:notice"]
    assert delivery["body"]["status"] == "CANCELLED"
    assert delivery["body"]["error"] == {"code": "Cancelled", "message": "changed my mind"}
    time.sleep(2)  # the worker, running again, receives PaymentRequested and must do nothing
    assert sandbox.legacy.charges_by_operation().get(operation_id) is None
    view = api.get(sandbox, f"/operations/{operation_id}").json()
    assert view["status"] == "CANCELLED"


def test_a_submitted_payment_cannot_be_cancelled(sandbox: Sandbox) -> None:
    response = post_payment(sandbox, payment())
    operation_id = response.json()["operationId"]
    wait_terminal(sandbox, operation_id)

    refused = cancel(sandbox, operation_id)

    assert refused.status_code == 409
    body: dict[str, Any] = refused.json()
    assert body["error"] == "OperationNotCancellable" and "is COMPLETED" in body["message"]


def test_an_unknown_operation_cannot_be_cancelled(sandbox: Sandbox) -> None:
    assert cancel(sandbox, "no-such-operation").status_code == 404
