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
from relay.state_machine import now_iso
from tests.builders import FakeContext
from tests.handlers.payments.builders import (
    accepted_operation,
    deliver,
    failed_ids,
    lower_claim_check_threshold,
    payment_request,
    produced_event,
    queued_event,
    set_item_attributes,
    steps_of,
)
from tests.handlers.payments.conftest import use_queue
from tests.handlers.payments.pipeline import Infrastructure, Pump, lambda_sqs_event

DEADLINE_ATTRIBUTES = ("dueShard", "dueAt")
OLDER_DEADLINE_ATTRIBUTES = ("deadlineShard", "deadlineAt")


def run_worker(event: dict[str, Any]) -> dict[str, Any]:
    from payments.handlers import payment_worker

    return payment_worker.handler(event, FakeContext())


def item(infra: Infrastructure, operation_id: str) -> dict[str, Any]:
    found = infra.operation_item(operation_id)
    assert found is not None
    return found


set_attributes = set_item_attributes


def assert_leaves_the_index_once_its_last_event_is_out(infra: Infrastructure, operation_id: str) -> None:
    """An ended operation stays in the deadline index until the stream publisher published its last
    event (until then the sweeper would re-publish it), then leaves it."""
    ended = item(infra, operation_id)
    assert ended.get("expiresAt") is not None
    assert not set(OLDER_DEADLINE_ATTRIBUTES) & set(ended)
    Pump(infra).publish_outbox()
    assert not set(DEADLINE_ATTRIBUTES) & set(item(infra, operation_id)), "out of the deadline index"


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
    assert "nextAttemptAt" not in done and done.get("attempts", 0) == 0
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
    assert [status for step, status in steps_of(infra, operation_id) if step == "payment"] == [
        "STARTED",
        "RECONCILING",
        "COMPLETED",
    ]
    assert legacy.charges_by_operation() == {operation_id: 1}
    # Reconciliation only reads: one POST (the lost one), then a GET.
    assert [c["method"] for c in legacy.calls() if c["path"].startswith("/payments")] == ["POST", "GET"]


def test_a_step_reads_the_time_from_its_wirings_clock_once(
    infra: Infrastructure, legacy: LegacyPaymentsFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clock is passed in: the step's history, its event and its transition carry the moment the
    wiring's clock gave, never a ``datetime.now`` of their own."""
    import relay.wiring

    operation_id = accepted_operation(payment_request())
    event = queued_event(infra, "payment-requests", expect=1)
    stopped = (datetime.now(UTC) + timedelta(minutes=7)).replace(microsecond=123000)
    monkeypatch.setattr(relay.wiring, "utc_now", lambda: stopped)

    assert failed_ids(run_worker(event)) == []
    operation = infra.operation(operation_id)
    assert operation is not None and operation.status.value == "PAYMENT_COMPLETED"
    at = now_iso(stopped)
    assert [(s.status, s.at) for s in operation.steps if s.step == "payment"] == [
        ("STARTED", at),
        ("COMPLETED", at),
    ]
    assert produced_event(infra, operation_id, "PaymentCompleted").occurred_at == stopped


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
    assert produced_event(infra, operation_id, "PaymentFailed").payload["code"] == "PaymentNotCharged"
    assert legacy.charges_by_operation() == {}
    assert_leaves_the_index_once_its_last_event_is_out(infra, operation_id)


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
    assert produced_event(infra, operation_id, "PaymentUnresolved").payload["code"] == "PaymentUnresolved"
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
    announced = produced_event(infra, operation_id, "InvoiceFailed")
    assert announced.payload["paymentRef"] == ended["paymentRef"]
    assert not set(DEADLINE_ATTRIBUTES) & set(ended), "published, so out of the deadline index"
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


def test_a_stranded_operation_is_redriven_from_the_item_and_completes_charged_once(
    infra: Infrastructure, legacy: LegacyPaymentsFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    operation_id = accepted_operation(payment_request())
    queued_event(infra, "payment-requests", expect=1)  # received and lost: never processed

    early = sweep(infra, monkeypatch, at=datetime.now(UTC) + timedelta(seconds=60))
    assert early.overdue == 0, "inside its silence the step is merely waiting"
    report = sweep(infra, monkeypatch, at=datetime.now(UTC) + timedelta(seconds=901))
    assert report.overdue == 1 and report.redriven == 1
    assert item(infra, operation_id)["redrives"] == 1
    (redrive,) = infra.item_events(operation_id)  # the re-drive is ONE write: its event in the item
    assert redrive.event_type == "PaymentRedriveDue" and redrive.payload["redrive"] == 1
    again = sweep(infra, monkeypatch, at=datetime.now(UTC) + timedelta(seconds=901))
    assert again.redriven == 0, "the re-drive moved the deadline: not twice"

    Pump(infra).run()

    assert item(infra, operation_id)["status"] == "COMPLETED"
    assert legacy.charges_by_operation() == {operation_id: 1}
    assert produced_event(infra, operation_id, "PaymentRedriveDue") == redrive
    assert not set(DEADLINE_ATTRIBUTES) & set(item(infra, operation_id))


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
    assert produced_event(infra, operation_id, "PaymentReconciliationDue").payload["attempt"] == 1


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
    assert produced_event(infra, operation_id, "PaymentFailed").payload["code"] == "PaymentNeverStarted"
    assert_leaves_the_index_once_its_last_event_is_out(infra, operation_id)


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


def test_an_ended_operation_whose_last_event_was_never_published_is_republished_and_leaves_the_index(
    infra: Infrastructure, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream's retries of the cancel's record were spent (its batch went to the stream DLQ): the
    operation is still in the deadline index, and when its deadline passes the sweeper publishes its
    last event from the item and takes it out, as the stream publisher would have."""
    from tests.handlers.payments.test_payments_cancel import cancel

    # With a callback, so the re-published terminal event reaches the notices queue (notice=yes).
    operation_id = accepted_operation(payment_request(callbackUrl="https://hooks.example.com/relay"))
    assert cancel(operation_id, {"reason": "changed"})["statusCode"] == 200  # never published
    assert set(DEADLINE_ATTRIBUTES) <= set(item(infra, operation_id))

    early = sweep(infra, monkeypatch, at=datetime.now(UTC) + timedelta(seconds=30))
    assert early.republished == 0, "the stream publisher still has its time"
    report = sweep(infra, monkeypatch, at=datetime.now(UTC) + timedelta(seconds=901))

    assert report.republished == 1 and report.redriven == 0 and not report.given_up
    ended = item(infra, operation_id)
    assert ended["status"] == "CANCELLED" and not set(DEADLINE_ATTRIBUTES) & set(ended)
    (message,) = infra.receive_all(infra.queues["notices"].url)
    notification = json.loads(message["Body"])
    assert json.loads(notification["Message"])["eventType"] == "OperationCancelled"
    assert notification["MessageAttributes"]["notice"]["Value"] == "yes"  # the sweeper sets it too
    again = sweep(infra, monkeypatch, at=datetime.now(UTC) + timedelta(seconds=901))
    assert again.republished == 0, "out of the index: re-published once"


def test_the_sweeper_alarms_when_a_non_terminal_operations_claim_check_is_about_to_expire(
    infra: Infrastructure, monkeypatch: pytest.MonkeyPatch
) -> None:
    lower_claim_check_threshold(monkeypatch, 256)
    in_s3 = accepted_operation(payment_request(details={"note": "n" * 300}))
    inline = accepted_operation(payment_request())
    assert item(infra, in_s3).get("requestRef") and not item(infra, inline).get("requestRef")
    queued_event(infra, "payment-requests", expect=2)
    for operation_id in (in_s3, inline):
        set_attributes(infra, operation_id, createdAt=iso(datetime.now(UTC) - timedelta(days=28)))

    report = sweep(infra, monkeypatch, at=datetime.now(UTC) + timedelta(hours=1))

    # Only a request in S3 expires with the bucket's rule; one kept in the operation lives as long.
    assert report.overdue == 2 and report.claim_checks_expiring == 1


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


def test_an_unpublished_event_of_an_operation_in_progress_is_published_before_its_step_is_redriven(
    infra: Infrastructure, legacy: LegacyPaymentsFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream gave up on the PaymentCompleted the payment step wrote into the item: post-processing
    is re-driven, and the PaymentCompleted itself is published first, so its other subscribers (orders:
    the order becomes PAID on it) do not miss it when the re-drive overwrites the item's events."""
    operation_id = accepted_operation(payment_request())
    run_worker(queued_event(infra, "payment-requests", expect=1))  # PaymentCompleted: never published
    (completed,) = infra.item_events(operation_id)
    assert completed.event_type == "PaymentCompleted"

    report = sweep(infra, monkeypatch, at=datetime.now(UTC) + timedelta(seconds=901))

    assert report.overdue == 1 and report.redriven == 1 and report.republished == 1
    (message,) = infra.receive_all(infra.queues["post-processing"].url)
    assert json.loads(json.loads(message["Body"])["Message"])["eventId"] == completed.event_id
    (redrive,) = infra.item_events(operation_id)
    assert redrive.event_type == "PostProcessingRedriveDue"


def test_an_invoice_redrive_names_no_input_and_the_step_rebuilds_it_from_the_operation(
    infra: Infrastructure,
    legacy: LegacyPaymentsFake,
    invoice_api: InvoiceApiFake,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The InvoiceRequested message was lost (parked, expired): the sweeper's InvoiceRedriveDue names
    no invoice input of its own, and the invoice step rebuilds it from the operation (the request and
    the paymentRef), as the InvoiceRequested would have named it."""
    from payments.handlers import invoice_worker

    operation_id = accepted_operation(payment_request())
    Pump(infra).run(until=lambda: item(infra, operation_id)["status"] == "INVOICE_PENDING")
    sweep(infra, monkeypatch, at=datetime.now(UTC) + timedelta(seconds=901))
    (redrive,) = infra.item_events(operation_id)
    assert redrive.event_type == "InvoiceRedriveDue" and "invoiceInputSha256" not in (redrive.payload or {})
    use_queue(monkeypatch, infra, "invoice-requests")
    # Whatever else the sweep sent (the InvoiceRequested it re-published from the item) is lost too.
    infra.receive_all(infra.queues["invoice-requests"].url, visibility=3600)

    response = invoice_worker.handler(deliver(infra, "invoice-requests", redrive), FakeContext())

    assert failed_ids(response) == []
    assert item(infra, operation_id)["status"] == "COMPLETED"
    assert infra.receive_all(infra.queues["invoice-requests"].dlq_url) == []  # not parked
    assert invoice_api.invoices_by_operation() == {operation_id: 1}
    assert legacy.charges_by_operation() == {operation_id: 1}
