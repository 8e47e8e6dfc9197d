"""No operation left behind: retry budgets in time, reconciliation, partial success, the sweeper.

Each test drives the real handlers on moto (the payments stack's resources from its template) and
the fakes on 127.0.0.1; time is moved by writing the operation's ``stateSince`` / the delivery's
``relay.firstFailureAt`` into the past, never by sleeping.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from local.fakes.invoice_api import InvoiceApiFake
from local.fakes.legacy_payments import LegacyPaymentsFake
from tests.builders import FakeContext
from tests.handlers.payments.builders import (
    accepted_operation,
    failed_ids,
    outbox_envelope,
    payment_request,
    queued_event,
)
from tests.handlers.payments.conftest import use_queue
from tests.handlers.payments.pipeline import OPERATIONS_TABLE, Infrastructure, Pump, lambda_sqs_event

DEADLINE_ATTRIBUTES = ("deadlineShard", "deadlineAt")


def run_worker(event: dict[str, Any]) -> dict[str, Any]:
    from payments.handlers import payment_worker

    return payment_worker.handler(event, FakeContext())


def item(infra: Infrastructure, operation_id: str) -> dict[str, Any]:
    found = infra.operation_item(operation_id)
    assert found is not None
    return found


def set_attributes(infra: Infrastructure, operation_id: str, **values: Any) -> None:
    from relay.idempotency import serialize_item

    names = {f"#a{i}": name for i, name in enumerate(values)}
    infra.ddb.update_item(
        TableName=OPERATIONS_TABLE,
        Key={"pk": {"S": f"OPERATION#{operation_id}"}, "sk": {"S": "OPERATION"}},
        UpdateExpression="SET " + ", ".join(f"#a{i} = :v{i}" for i in range(len(values))),
        ExpressionAttributeNames=names,
        ExpressionAttributeValues=serialize_item({f":v{i}": v for i, v in enumerate(values.values())}),
    )


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def queued(infra: Infrastructure, queue: str, *, within: float = 4.0) -> list[dict[str, Any]]:
    """The messages on ``queue``, waiting up to ``within`` seconds for a delayed one (moto honours
    DelaySeconds; a reconciliation check waits at least the legacy client's 1 s timeout + 1 s)."""
    deadline = time.monotonic() + within
    while True:
        found = infra.receive_all(infra.queues[queue].url, wait=1)
        if found or time.monotonic() >= deadline:
            return found


def worker_event(infra: Infrastructure, messages: list[dict[str, Any]]) -> dict[str, Any]:
    return lambda_sqs_event(messages, infra.queues["payment-requests"])


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retry and check delays of 0 s, so a delayed copy is receivable at once."""
    from relay.wiring import reset_all

    monkeypatch.setenv("RELAY_BACKOFF_BASE_SECONDS", "0")
    monkeypatch.setenv("PAYMENT_CHECK_BASE_DELAY_SECONDS", "0")
    reset_all()


# -------------------------------------------------------------------------------------------------
# retry budgets in time
# -------------------------------------------------------------------------------------------------


def test_legacy_outage_is_waited_out_with_a_delay_chain_without_burning_receives(
    infra: Infrastructure, legacy: LegacyPaymentsFake, fast_retries: None
) -> None:
    operation_id = accepted_operation(payment_request())
    event = queued_event(infra, "payment-requests", expect=1)
    legacy.set_knobs(outage=True)

    for attempt in range(1, 7):  # more attempts than maxReceiveCount allows receives
        response = run_worker(event)
        assert failed_ids(response) == [], "handled: a delayed copy carries the retry"
        (copy,) = queued(infra, "payment-requests")
        assert copy["Attributes"]["ApproximateReceiveCount"] == "1"
        assert copy["MessageAttributes"]["relay.attempt"]["StringValue"] == str(attempt)
        current = item(infra, operation_id)
        assert current["status"] == "PAYMENT_PROCESSING"
        assert current["attempts"] == attempt and current["nextAttemptAt"] and "503" in current["lastError"]
        event = worker_event(infra, [copy])
    assert infra.receive_all(infra.queues["payment-requests"].dlq_url) == []

    legacy.set_knobs(outage=False)
    assert failed_ids(run_worker(event)) == []
    done = item(infra, operation_id)
    assert done["status"] == "PAYMENT_COMPLETED"
    assert "nextAttemptAt" not in done and done["attempts"] == 0
    assert legacy.charges_by_operation() == {operation_id: 1}


def test_a_spent_payment_retry_budget_reconciles_instead_of_failing(
    infra: Infrastructure, legacy: LegacyPaymentsFake, fast_retries: None
) -> None:
    operation_id = accepted_operation(payment_request())
    event = queued_event(infra, "payment-requests", expect=1)
    legacy.set_knobs(outage=True)
    run_worker(event)
    (copy,) = queued(infra, "payment-requests")
    # The first failure was longer ago than the worker's budget (24 h by default).
    copy["MessageAttributes"]["relay.firstFailureAt"]["StringValue"] = str(
        int((datetime.now(UTC) - timedelta(days=2)).timestamp())
    )

    response = run_worker(worker_event(infra, [copy]))

    assert failed_ids(response) == []
    current = item(infra, operation_id)
    assert current["status"] == "RECONCILING"
    assert current["reconcileReason"].startswith("PaymentRetryBudgetSpent")
    (check,) = queued(infra, "payment-requests")
    assert json.loads(check["Body"])["eventType"] == "PaymentReconciliationDue"
    assert infra.receive_all(infra.queues["payment-requests"].dlq_url) == []


# -------------------------------------------------------------------------------------------------
# reconciliation
# -------------------------------------------------------------------------------------------------


def test_a_reply_lost_after_the_charge_is_reconciled_to_completed_charged_once(
    infra: Infrastructure, legacy: LegacyPaymentsFake, fast_retries: None
) -> None:
    operation_id = accepted_operation(payment_request())
    event = queued_event(infra, "payment-requests", expect=1)
    legacy.set_knobs(fail_after_commit_rate=1.0, fail_after_commit_mode="drop")

    assert failed_ids(run_worker(event)) == []
    assert item(infra, operation_id)["status"] == "RECONCILING"
    legacy.set_knobs(fail_after_commit_rate=0.0)
    (check,) = queued(infra, "payment-requests")
    assert failed_ids(run_worker(worker_event(infra, [check]))) == []

    done = item(infra, operation_id)
    assert done["status"] == "PAYMENT_COMPLETED" and done["paymentRef"]
    assert [s["status"] for s in done["steps"] if s["step"] == "payment"] == [
        "STARTED",
        "RECONCILING",
        "COMPLETED",
    ]
    assert legacy.charges_by_operation() == {operation_id: 1}
    # Reconciliation only reads: one POST (the lost one), then a GET.
    assert [c["method"] for c in legacy.calls() if c["path"].startswith("/payments")] == ["POST", "GET"]


def test_a_timeout_without_effect_is_reconciled_to_failed_not_charged(
    infra: Infrastructure, legacy: LegacyPaymentsFake, fast_retries: None
) -> None:
    operation_id = accepted_operation(payment_request())
    event = queued_event(infra, "payment-requests", expect=1)
    legacy.set_knobs(timeout_rate=1.0)
    run_worker(event)
    assert item(infra, operation_id)["status"] == "RECONCILING"
    legacy.set_knobs(timeout_rate=0.0)

    (check,) = queued(infra, "payment-requests")
    run_worker(worker_event(infra, [check]))

    failed = item(infra, operation_id)
    assert failed["status"] == "FAILED" and failed["error"]["code"] == "PaymentNotCharged"
    assert outbox_envelope(infra, operation_id, "PaymentFailed").payload["code"] == "PaymentNotCharged"
    assert legacy.charges_by_operation() == {}
    assert not set(DEADLINE_ATTRIBUTES) & set(failed), "a terminal operation leaves the deadline index"


def test_still_processing_past_the_maximum_age_reconciles_then_ends_unresolved_after_its_budget(
    infra: Infrastructure, legacy: LegacyPaymentsFake, fast_retries: None
) -> None:
    legacy.set_knobs(accept_then_complete_after=1000)
    operation_id = accepted_operation(payment_request())
    run_worker(queued_event(infra, "payment-requests", expect=1))
    set_attributes(infra, operation_id, paymentAcceptedAt=iso(datetime.now(UTC) - timedelta(hours=2)))
    (check,) = queued(infra, "payment-requests")
    run_worker(worker_event(infra, [check]))
    assert item(infra, operation_id)["status"] == "RECONCILING"

    (reconcile,) = queued(infra, "payment-requests")
    run_worker(worker_event(infra, [reconcile]))  # still PROCESSING: another check
    assert item(infra, operation_id)["status"] == "RECONCILING"
    set_attributes(infra, operation_id, stateSince=iso(datetime.now(UTC) - timedelta(days=2)))
    (again,) = queued(infra, "payment-requests")
    run_worker(worker_event(infra, [again]))

    ended = item(infra, operation_id)
    assert ended["status"] == "PAYMENT_UNRESOLVED" and ended["error"]["code"] == "PaymentUnresolved"
    assert abs(int(ended["expiresAt"]) - (datetime.now(UTC) + timedelta(days=90)).timestamp()) < 60
    assert outbox_envelope(infra, operation_id, "PaymentUnresolved").payload["code"] == "PaymentUnresolved"
    assert queued(infra, "payment-requests") == []
    assert legacy.charges_by_operation() == {operation_id: 1}


# -------------------------------------------------------------------------------------------------
# partial success
# -------------------------------------------------------------------------------------------------


def test_a_refused_invoice_ends_in_invoice_failed_with_the_payment_reference_and_reason(
    infra: Infrastructure, legacy: LegacyPaymentsFake, invoice_api: InvoiceApiFake
) -> None:
    invoice_api.set_knobs(refuse_payers=frozenset({"acct-no-invoice"}))
    operation_id = accepted_operation(payment_request(payer="acct-no-invoice"))

    Pump(infra).run()

    ended = item(infra, operation_id)
    assert ended["status"] == "INVOICE_FAILED"
    assert ended["error"]["code"] == "InvoiceRefused"
    assert ended["paymentRef"] in ended["error"]["message"] and "acct-no-invoice" in ended["error"]["message"]
    assert abs(int(ended["expiresAt"]) - (datetime.now(UTC) + timedelta(days=90)).timestamp()) < 60
    announced = outbox_envelope(infra, operation_id, "InvoiceFailed")
    assert announced.payload["paymentRef"] == ended["paymentRef"]
    assert infra.receive_all(infra.queues["invoice-requests"].dlq_url) == []
    assert legacy.charges_by_operation() == {operation_id: 1}


# -------------------------------------------------------------------------------------------------
# the sweeper
# -------------------------------------------------------------------------------------------------


def sweep(infra: Infrastructure, monkeypatch: pytest.MonkeyPatch, *, at: datetime) -> Any:
    from payments.settings import SWEEPER
    from payments.sweeper import sweep as run_sweep
    from payments.wiring import wiring

    from relay.envelope import new_envelope
    from relay.wiring import reset_all

    use_queue(monkeypatch, infra, "sweeps")
    reset_all()
    cause = new_envelope("SweepDue", identity=["sweep", iso(at)], ids={}, payload={}, correlation_id="sweep")
    return run_sweep(wiring.checked(SWEEPER)(), cause, now=at)


def test_a_stranded_operation_is_redriven_through_the_outbox_and_completes_charged_once(
    infra: Infrastructure, legacy: LegacyPaymentsFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    operation_id = accepted_operation(payment_request())
    queued_event(infra, "payment-requests", expect=1)  # received and lost: never processed

    early = sweep(infra, monkeypatch, at=datetime.now(UTC) + timedelta(seconds=60))
    assert early.overdue == 0, "inside its silence the step is merely waiting"
    report = sweep(infra, monkeypatch, at=datetime.now(UTC) + timedelta(seconds=901))
    assert report.overdue == 1 and report.redriven == 1
    assert item(infra, operation_id)["redrives"] == 1
    again = sweep(infra, monkeypatch, at=datetime.now(UTC) + timedelta(seconds=901))
    assert again.redriven == 0, "the re-drive moved the deadline: not twice"

    Pump(infra).run()

    assert item(infra, operation_id)["status"] == "COMPLETED"
    assert legacy.charges_by_operation() == {operation_id: 1}
    assert outbox_envelope(infra, operation_id, "PaymentRedriveDue").payload["redrive"] == 1


def test_the_sweeper_leaves_a_step_that_scheduled_its_next_attempt_alone(
    infra: Infrastructure, legacy: LegacyPaymentsFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    legacy.set_knobs(accept_then_complete_after=1000)
    operation_id = accepted_operation(payment_request())
    run_worker(queued_event(infra, "payment-requests", expect=1))  # a status check in 30-900 s
    next_at = datetime.fromisoformat(item(infra, operation_id)["nextAttemptAt"].replace("Z", "+00:00"))

    report = sweep(infra, monkeypatch, at=next_at + timedelta(seconds=60))

    assert report.overdue == 0 and report.redriven == 0
    assert item(infra, operation_id)["status"] == "PAYMENT_PROCESSING"


def test_the_sweeper_reconciles_a_payment_step_past_its_budget(
    infra: Infrastructure, legacy: LegacyPaymentsFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    legacy.set_knobs(accept_then_complete_after=1000)
    operation_id = accepted_operation(payment_request())
    run_worker(queued_event(infra, "payment-requests", expect=1))
    set_attributes(infra, operation_id, stateSince=iso(datetime.now(UTC) - timedelta(days=2)))

    report = sweep(infra, monkeypatch, at=datetime.now(UTC) + timedelta(hours=1))

    assert report.given_up == {"PAYMENT_PROCESSING": 1}
    current = item(infra, operation_id)
    assert current["status"] == "RECONCILING" and "PaymentStepBudgetSpent" in current["reconcileReason"]
    assert outbox_envelope(infra, operation_id, "PaymentReconciliationDue").payload["attempt"] == 1


def test_the_sweeper_fails_an_operation_that_never_started_and_orders_hear_of_it(
    infra: Infrastructure, monkeypatch: pytest.MonkeyPatch
) -> None:
    operation_id = accepted_operation(payment_request())
    queued_event(infra, "payment-requests", expect=1)
    set_attributes(infra, operation_id, stateSince=iso(datetime.now(UTC) - timedelta(hours=3)))

    report = sweep(infra, monkeypatch, at=datetime.now(UTC) + timedelta(hours=1))

    assert report.given_up == {"PENDING": 1}
    failed = item(infra, operation_id)
    assert failed["status"] == "FAILED" and failed["error"]["code"] == "PaymentNeverStarted"
    assert outbox_envelope(infra, operation_id, "PaymentFailed").payload["code"] == "PaymentNeverStarted"


def test_the_sweeper_ends_a_charged_operation_stuck_before_its_invoice_as_invoice_failed(
    infra: Infrastructure, legacy: LegacyPaymentsFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    operation_id = accepted_operation(payment_request())
    run_worker(queued_event(infra, "payment-requests", expect=1))
    assert item(infra, operation_id)["status"] == "PAYMENT_COMPLETED"
    set_attributes(infra, operation_id, stateSince=iso(datetime.now(UTC) - timedelta(hours=3)))

    report = sweep(infra, monkeypatch, at=datetime.now(UTC) + timedelta(hours=1))

    assert report.given_up == {"PAYMENT_COMPLETED": 1}
    ended = item(infra, operation_id)
    assert ended["status"] == "INVOICE_FAILED" and ended["error"]["code"] == "StepBudgetSpent"
    assert ended["paymentRef"] in ended["error"]["message"]


def test_an_outbox_row_never_published_is_republished_after_its_grace(
    infra: Infrastructure, monkeypatch: pytest.MonkeyPatch
) -> None:
    operation_id = accepted_operation(payment_request())  # its stream batch is never read
    (row,) = infra.outbox_rows(operation_id)
    assert set(DEADLINE_ATTRIBUTES) <= set(row)

    early = sweep(infra, monkeypatch, at=datetime.now(UTC) + timedelta(seconds=30))
    assert early.republished == 0, "the stream publisher still has its grace period"
    report = sweep(infra, monkeypatch, at=datetime.now(UTC) + timedelta(seconds=301))

    assert report.republished == 1
    (published,) = infra.outbox_rows(operation_id)
    assert published["publishedAt"] and not set(DEADLINE_ATTRIBUTES) & set(published)
    (message,) = infra.receive_all(infra.queues["payment-requests"].url)
    assert json.loads(json.loads(message["Body"])["Message"])["eventType"] == "PaymentRequested"


def test_the_sweeper_alarms_when_a_non_terminal_operations_claim_check_is_about_to_expire(
    infra: Infrastructure, monkeypatch: pytest.MonkeyPatch
) -> None:
    operation_id = accepted_operation(payment_request())
    queued_event(infra, "payment-requests", expect=1)
    set_attributes(infra, operation_id, createdAt=iso(datetime.now(UTC) - timedelta(days=28)))

    report = sweep(infra, monkeypatch, at=datetime.now(UTC) + timedelta(hours=1))

    assert report.claim_checks_expiring == 1


def test_the_sweeper_handler_accepts_only_its_schedules_envelope(
    infra: Infrastructure, monkeypatch: pytest.MonkeyPatch
) -> None:
    from payments.handlers import sweeper

    from relay.wiring import reset_all

    use_queue(monkeypatch, infra, "sweeps")
    reset_all()
    queue = infra.queues["sweeps"]
    for event_type in ("SweepDue", "PaymentRequested"):
        body = {
            "eventId": f"exec-{event_type}",
            "eventType": event_type,
            "eventVersion": "1.0",
            "occurredAt": "2026-12-01T10:00:00Z",
            "correlationId": "exec-1",
            "payload": {"schedule": "arn:aws:scheduler:us-east-1:000000000000:schedule/default/sweep"},
        }
        infra.sqs.send_message(QueueUrl=queue.url, MessageBody=json.dumps(body))
    event = lambda_sqs_event(infra.receive_all(queue.url), queue)

    response = sweeper.handler(event, FakeContext())

    assert failed_ids(response) == []
    (parked,) = infra.receive_all(queue.dlq_url)
    assert json.loads(parked["Body"])["eventType"] == "PaymentRequested"


def test_each_further_redrive_of_a_silent_step_waits_twice_as_long_and_never_past_its_give_up(
    infra: Infrastructure, legacy: LegacyPaymentsFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by ``make chaos``: a step silent for one silence is most often waiting behind a backlog. A
    re-drive every silence added a copy per silence to the queue that was behind; doubling the wait
    after each re-drive adds a few at most, and the give-up stays on time."""
    from payments.operations import Status
    from payments.settings import Settings

    operation_id = accepted_operation(payment_request())
    queued_event(infra, "payment-requests", expect=1)  # lost: never processed
    t0 = datetime.now(UTC)
    assert sweep(infra, monkeypatch, at=t0 + timedelta(seconds=901)).redriven == 1  # next look: +900
    assert sweep(infra, monkeypatch, at=t0 + timedelta(seconds=1802)).redriven == 1  # next look: +1800
    assert sweep(infra, monkeypatch, at=t0 + timedelta(seconds=2703)).redriven == 0, "not one silence"
    assert sweep(infra, monkeypatch, at=t0 + timedelta(seconds=3603)).redriven == 1
    assert item(infra, operation_id)["redrives"] == 3

    settings = Settings(silence_seconds=900, pending_budget_seconds=4000)
    give_up = t0 + timedelta(seconds=4000 + 900)
    late = settings.redrive_deadline(
        t0 + timedelta(seconds=3603), status=Status.PENDING, since=t0, redrives=2
    )
    assert late == give_up  # 3603 + 3600 would be past it
    assert settings.redrive_deadline(
        give_up, status=Status.PENDING, since=t0, redrives=9
    ) == give_up + timedelta(seconds=900), "at least one silence"
