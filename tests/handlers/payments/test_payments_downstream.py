"""The outbox publisher, the post-processor and the invoice worker."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from local.fakes.invoice_api import InvoiceApiFake
from local.fakes.legacy_payments import LegacyPaymentsFake
from tests.builders import FakeContext, ddb_stream_event, ddb_stream_record
from tests.handlers.payments.builders import (
    accepted_operation,
    failed_ids,
    outbox_envelope,
    payment_request,
    queued_event,
)
from tests.handlers.payments.pipeline import BUCKET, Infrastructure, Pump


def pay(infra: Infrastructure) -> str:
    """An operation whose payment completed (PaymentCompleted in the outbox, not yet published)."""
    from payments.handlers import payment_worker

    operation_id = accepted_operation(payment_request())
    payment_worker.handler(queued_event(infra, "payment-requests", expect=1), FakeContext())
    return operation_id


def post_process(event: dict[str, Any]) -> dict[str, Any]:
    from payments.handlers import post_processor

    return post_processor.handler(event, FakeContext())


def invoice(event: dict[str, Any]) -> dict[str, Any]:
    from payments.handlers import invoice_worker

    return invoice_worker.handler(event, FakeContext())


def item(infra: Infrastructure, operation_id: str) -> dict[str, Any]:
    found = infra.operation_item(operation_id)
    assert found is not None
    return found


def use(monkeypatch: pytest.MonkeyPatch, infra: Infrastructure, queue: str) -> None:
    for name, value in infra.consumer_env(queue).items():
        monkeypatch.setenv(name, value)


# outbox publisher --------------------------------------------------------------------------------


def test_outbox_rows_are_published_with_event_type_and_reach_only_the_filtered_queue(
    infra: Infrastructure,
) -> None:
    operation_id = accepted_operation()

    published = Pump(infra).publish_outbox()

    assert published >= 2  # the operation item and its outbox row are both on the stream
    (message,) = infra.receive_all(infra.queues["payment-requests"].url)
    notification = json.loads(message["Body"])
    assert notification["Type"] == "Notification"  # enveloped delivery
    assert notification["MessageAttributes"]["eventType"]["Value"] == "PaymentRequested"
    assert json.loads(notification["Message"])["ids"]["operationId"] == operation_id
    assert infra.receive_all(infra.queues["post-processing"].url) == []
    assert infra.receive_all(infra.queues["invoice-requests"].url) == []
    (row,) = infra.outbox_rows(operation_id)
    assert row["publishedAt"] and row["expiresAt"]


def test_outbox_publisher_ignores_operation_items_on_the_stream(infra: Infrastructure) -> None:
    from payments.handlers import outbox_publisher

    event = ddb_stream_event(
        [
            ddb_stream_record(
                "MODIFY",
                keys={"pk": {"S": "OPERATION#x"}, "sk": {"S": "OPERATION"}},
                new_image={"pk": {"S": "OPERATION#x"}, "sk": {"S": "OPERATION"}, "kind": {"S": "operation"}},
                table="payments-operations",
            )
        ]
    )

    response = outbox_publisher.handler(event, FakeContext())

    assert response == {"batchItemFailures": []}
    for queue in infra.queues.values():
        assert infra.receive_all(queue.url) == []


# post-processor ----------------------------------------------------------------------------------


def test_payment_completed_moves_through_post_processing_to_invoice_pending_with_invoice_input(
    infra: Infrastructure, monkeypatch: pytest.MonkeyPatch
) -> None:
    operation_id = pay(infra)
    use(monkeypatch, infra, "post-processing")

    response = post_process(queued_event(infra, "post-processing", expect=1))

    assert failed_ids(response) == []
    stored = item(infra, operation_id)
    assert stored["status"] == "INVOICE_PENDING"
    assert [(s["step"], s["status"]) for s in stored["steps"]][-2:] == [
        ("post-processing", "STARTED"),
        ("invoice", "REQUESTED"),
    ]
    key = f"payments/{operation_id}/invoice-input.json"
    document = json.loads(infra.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    assert document["operationId"] == operation_id
    assert document["paymentRef"] == stored["paymentRef"]
    assert document["amount"] == "12.50" and document["currency"] == "EUR"
    requested = outbox_envelope(infra, operation_id, "InvoiceRequested")
    assert requested.claim_check is not None and requested.claim_check.key == key


def test_payment_completed_delivered_twice_has_no_second_effect(
    infra: Infrastructure, monkeypatch: pytest.MonkeyPatch
) -> None:
    operation_id = pay(infra)
    use(monkeypatch, infra, "post-processing")
    event = queued_event(infra, "post-processing", expect=1)
    post_process(event)
    before = item(infra, operation_id)

    response = post_process(event)

    assert failed_ids(response) == []
    assert item(infra, operation_id) == before
    assert [r["eventType"] for r in infra.outbox_rows(operation_id)].count("InvoiceRequested") == 1


def test_payment_completed_for_an_operation_not_yet_paid_is_parked_as_illegal_transition(
    infra: Infrastructure, monkeypatch: pytest.MonkeyPatch
) -> None:
    from relay.envelope import new_envelope
    from tests.handlers.payments.builders import deliver

    operation_id = accepted_operation()
    use(monkeypatch, infra, "post-processing")
    bogus = new_envelope(
        "PaymentCompleted",
        identity=[operation_id, "payment-completed"],
        ids={"operationId": operation_id},
        claim_check=outbox_envelope(infra, operation_id, "PaymentRequested").claim_check,
        correlation_id="c",
    )

    response = post_process(deliver(infra, "post-processing", bogus))

    assert failed_ids(response) == []
    (parked,) = infra.receive_all(infra.queues["post-processing"].dlq_url)
    assert parked["MessageAttributes"]["relay.errorClass"]["StringValue"] == "IllegalTransition"
    assert item(infra, operation_id)["status"] == "PENDING"


# invoice worker ----------------------------------------------------------------------------------


def invoice_pending(infra: Infrastructure, monkeypatch: pytest.MonkeyPatch) -> tuple[str, dict[str, Any]]:
    operation_id = pay(infra)
    use(monkeypatch, infra, "post-processing")
    post_process(queued_event(infra, "post-processing", expect=1))
    use(monkeypatch, infra, "invoice-requests")
    return operation_id, queued_event(infra, "invoice-requests", expect=1)


def test_invoice_requested_issues_one_invoice_and_completes_the_operation(
    infra: Infrastructure, invoice_api: InvoiceApiFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    operation_id, event = invoice_pending(infra, monkeypatch)

    response = invoice(event)

    assert failed_ids(response) == []
    stored = item(infra, operation_id)
    assert stored["status"] == "COMPLETED"
    assert stored["invoiceId"].startswith("INV-")
    assert (stored["steps"][-1]["step"], stored["steps"][-1]["status"]) == ("invoice", "COMPLETED")
    assert abs(int(stored["expiresAt"]) - (datetime.now(UTC) + timedelta(days=30)).timestamp()) < 60
    assert invoice_api.invoices() == {f"{operation_id}:invoice": 1}
    done = outbox_envelope(infra, operation_id, "OperationCompleted")
    assert done.payload == {"invoiceId": stored["invoiceId"], "paymentRef": stored["paymentRef"]}


def test_invoice_requested_delivered_twice_invoices_once(
    infra: Infrastructure, invoice_api: InvoiceApiFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    operation_id, event = invoice_pending(infra, monkeypatch)

    invoice(event)
    calls = len(invoice_api.calls())
    response = invoice(event)

    assert failed_ids(response) == []
    assert len(invoice_api.calls()) == calls
    assert invoice_api.invoices_by_operation() == {operation_id: 1}


def test_crash_after_the_invoice_was_issued_before_the_commit_does_not_invoice_again(
    infra: Infrastructure, invoice_api: InvoiceApiFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    from payments.store import OperationStore

    operation_id, event = invoice_pending(infra, monkeypatch)
    real_commit = OperationStore.commit_once

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("the process died before committing")

    monkeypatch.setattr(OperationStore, "commit_once", crash)
    assert failed_ids(invoice(event)) == [], "handled by re-sending a delayed copy"
    monkeypatch.setattr(OperationStore, "commit_once", real_commit)
    calls = len(invoice_api.calls())

    response = invoice(event)

    assert failed_ids(response) == []
    assert item(infra, operation_id)["status"] == "COMPLETED"
    assert len(invoice_api.calls()) == calls, "Powertools idempotency replayed the stored result"
    assert invoice_api.invoices_by_operation() == {operation_id: 1}


def test_invoice_api_outage_is_retried_and_invoices_once(
    infra: Infrastructure, invoice_api: InvoiceApiFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    operation_id, event = invoice_pending(infra, monkeypatch)
    invoice_api.set_knobs(outage=True)

    first = invoice(event)
    invoice_api.set_knobs(outage=False)
    second = invoice(event)

    assert failed_ids(first) == [], "handled by re-sending a delayed copy"
    assert failed_ids(second) == []
    assert item(infra, operation_id)["status"] == "COMPLETED"
    assert invoice_api.invoices_by_operation() == {operation_id: 1}


def test_legacy_fake_is_untouched_by_the_downstream_steps(
    infra: Infrastructure,
    legacy: LegacyPaymentsFake,
    invoice_api: InvoiceApiFake,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    operation_id, event = invoice_pending(infra, monkeypatch)
    calls = len(legacy.calls())

    invoice(event)

    assert len(legacy.calls()) == calls
    assert legacy.charges_by_operation() == {operation_id: 1}
