"""No operation left behind, end to end through the sandbox (fast clock: back-off 1-4 s, a step silent
5 s counts as stranded): an outage longer than the old receive-count budget, a reply lost after the
charge, an invoice refused for good, and an operation whose message was deleted from its queue."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from emulator.server import client
from local import lifecycle
from local.fakes._server import FakeService
from local.sandbox import Sandbox
from tests.e2e import api
from tests.e2e.test_payments_e2e import payment, queue_url

pytestmark = pytest.mark.e2e

TERMINAL = {"COMPLETED", "FAILED", "PAYMENT_UNRESOLVED", "INVOICE_FAILED", "CANCELLED"}


def accept(sb: Sandbox, body: dict[str, Any]) -> str:
    response = api.post(sb, "/payments", json=body, headers={"Idempotency-Key": uuid.uuid4().hex})
    assert response.status_code == 202, response.text
    return str(response.json()["operationId"])


def view(sb: Sandbox, operation_id: str) -> dict[str, Any]:
    return dict(api.get(sb, f"/operations/{operation_id}").json())


def wait_for(sb: Sandbox, operation_id: str, statuses: set[str], timeout: float = 90) -> dict[str, Any]:
    deadline = time.time() + timeout
    current: dict[str, Any] = {}
    while time.time() < deadline:
        current = view(sb, operation_id)
        if current.get("status") in statuses:
            return current
        time.sleep(0.5)
    raise AssertionError(f"operation {operation_id} not in {statuses} after {timeout} s: {current}")


@contextmanager
def knobs(fake: FakeService[Any], **values: Any) -> Iterator[None]:
    before = fake.knobs
    fake.set_knobs(**values)
    try:
        yield
    finally:
        fake.set_knobs(**{name: getattr(before, name) for name in values})


def dlq_depth(sb: Sandbox, suffix: str) -> int:
    sqs = client("sqs", sb.endpoint)
    attrs = sqs.get_queue_attributes(QueueUrl=queue_url(sb, suffix), AttributeNames=["All"])["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])


def max_receive_count(sb: Sandbox, suffix: str) -> int:
    sqs = client("sqs", sb.endpoint)
    attrs = sqs.get_queue_attributes(QueueUrl=queue_url(sb, suffix), AttributeNames=["RedrivePolicy"])
    return int(json.loads(attrs["Attributes"]["RedrivePolicy"])["maxReceiveCount"])


def test_a_legacy_outage_longer_than_the_old_budget_recovers_with_every_payment_charged_once(
    sandbox: Sandbox,
) -> None:
    # The old budget: this many receives, then the redrive policy moved the message to the DLQ.
    old_budget = max_receive_count(sandbox, "payments-payment-requests")
    dlq_before = dlq_depth(sandbox, "payments-payment-requests-dlq")
    with knobs(sandbox.legacy, outage=True):
        operations = [accept(sandbox, payment(payer="lifecycle")) for _ in range(3)]
        deadline = time.time() + 60
        # Until every payment has been refused more often than maxReceiveCount would ever allow.
        while time.time() < deadline:
            attempts = [view(sandbox, op).get("attempts") or 0 for op in operations]
            if min(attempts) > old_budget:
                break
            time.sleep(1)
        assert min(attempts) > old_budget, attempts
        assert {view(sandbox, op)["status"] for op in operations} == {"PAYMENT_PROCESSING"}
        assert all(view(sandbox, op)["nextAttemptAt"] for op in operations)

    for op in operations:
        assert wait_for(sandbox, op, TERMINAL)["status"] == "COMPLETED"
    charges = sandbox.legacy.charges_by_operation()
    assert [charges.get(op) for op in operations] == [1, 1, 1]
    assert dlq_depth(sandbox, "payments-payment-requests-dlq") == dlq_before


def test_a_reply_lost_after_the_charge_is_reconciled_to_completed_charged_once(sandbox: Sandbox) -> None:
    with knobs(sandbox.legacy, fail_after_commit_rate=1.0, fail_after_commit_mode="drop"):
        operation_id = accept(sandbox, payment())
        done = wait_for(sandbox, operation_id, TERMINAL)

    assert done["status"] == "COMPLETED"
    payment_steps = [s["status"] for s in done["steps"] if s["step"] == "payment"]
    assert payment_steps == ["STARTED", "RECONCILING", "COMPLETED"]
    assert sandbox.legacy.charges_by_operation()[operation_id] == 1
    assert sandbox.invoices.invoices_by_operation()[operation_id] == 1


def test_an_invoice_refused_for_good_ends_in_invoice_failed_charged_and_not_invoiced(
    sandbox: Sandbox,
) -> None:
    with knobs(sandbox.invoices, refuse_payers=frozenset({"no-invoice"})):
        operation_id = accept(sandbox, payment(payer="no-invoice"))
        ended = wait_for(sandbox, operation_id, TERMINAL)

    assert ended["status"] == "INVOICE_FAILED"
    assert ended["error"]["code"] == "InvoiceRefused"
    assert ended["results"]["paymentRef"] in ended["error"]["message"]
    assert sandbox.legacy.charges_by_operation()[operation_id] == 1
    assert sandbox.invoices.invoices_by_operation().get(operation_id) is None


def _until(condition: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.time() + timeout
    while not condition():
        assert time.time() < deadline, "the condition never held"
        time.sleep(0.2)


def _delayed(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesDelayed"])
    return int(attributes["Attributes"]["ApproximateNumberOfMessagesDelayed"])


def test_an_operation_whose_message_was_deleted_is_swept_and_completes(sandbox: Sandbox) -> None:
    sqs = client("sqs", sandbox.endpoint)
    with knobs(sandbox.legacy, outage=True):
        operation_id = accept(sandbox, payment())
        wait_for(sandbox, operation_id, {"PAYMENT_PROCESSING"})
        url = queue_url(sandbox, "payments-payment-requests")
        # The step records nextAttemptAt first, then the kernel re-sends the message with that delay:
        # purging in between would let the copy land afterwards and complete the payment.
        _until(lambda: bool(view(sandbox, operation_id).get("nextAttemptAt")))
        _until(lambda: _delayed(sqs, url) >= 1)
        # The retry copy waits (delayed) in the queue: delete it, as an operator's purge would.
        sqs.purge_queue(QueueUrl=url)
    time.sleep(10)  # past the next attempt (≤ 4 s) plus the 5 s of silence
    assert view(sandbox, operation_id)["status"] == "PAYMENT_PROCESSING", "stranded: nothing moves it"

    lifecycle.sweep_now(sandbox)

    done = wait_for(sandbox, operation_id, TERMINAL)
    assert done["status"] == "COMPLETED"
    assert sandbox.legacy.charges_by_operation()[operation_id] == 1
