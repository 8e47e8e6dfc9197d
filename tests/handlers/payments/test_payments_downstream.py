"""The outbox publisher, the post-processor and the invoice worker."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from payments.post_processing import invoice_input

from local.fakes.invoice_api import InvoiceApiFake
from local.fakes.legacy_payments import LegacyPaymentsFake
from relay.claim_check import canonical_bytes
from tests.builders import FakeContext, ddb_stream_event, ddb_stream_record
from tests.handlers.payments.builders import (
    accepted_operation,
    failed_ids,
    lower_claim_check_threshold,
    payment_request,
    produced_event,
    produced_types,
    queued_event,
    steps_of,
)
from tests.handlers.payments.pipeline import BUCKET, Infrastructure, Pump


def pay(infra: Infrastructure) -> str:
    """An operation whose payment completed (PaymentCompleted in the item, not yet published)."""
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


def test_an_operations_events_are_published_with_event_type_and_reach_only_the_filtered_queue(
    infra: Infrastructure,
) -> None:
    operation_id = accepted_operation()
    accepted = infra.operation_item(operation_id)

    published = Pump(infra).publish_outbox()

    assert published == 1  # one write, one stream record: the operation with its PaymentRequested
    (message,) = infra.receive_all(infra.queues["payment-requests"].url)
    notification = json.loads(message["Body"])
    assert notification["Type"] == "Notification"  # enveloped delivery
    assert notification["MessageAttributes"]["eventType"]["Value"] == "PaymentRequested"
    assert json.loads(notification["Message"])["ids"]["operationId"] == operation_id
    assert infra.receive_all(infra.queues["post-processing"].url) == []
    assert infra.receive_all(infra.queues["invoice-requests"].url) == []
    # Nothing is marked per event: the open operation is left exactly as it was written.
    assert infra.operation_item(operation_id) == accepted
    assert infra.outbox_rows(operation_id) == []


def _operation_image(**attributes: Any) -> dict[str, Any]:
    return {"pk": {"S": "OPERATION#x"}, "sk": {"S": "OPERATION"}, "kind": {"S": "operation"}, **attributes}


def test_outbox_publisher_publishes_nothing_for_an_operation_write_that_added_no_event(
    infra: Infrastructure,
) -> None:
    from payments.handlers import outbox_publisher

    from relay.entity_events import compact
    from relay.envelope import new_envelope

    requested = new_envelope(
        "PaymentRequested",
        identity=["x", "payment-requested"],
        ids={"operationId": "x"},
        payload={},
        correlation_id="c",
    )
    events = {"ev": {"L": [{"S": compact(requested)}]}}
    keys = {"pk": {"S": "OPERATION#x"}, "sk": {"S": "OPERATION"}}
    event = ddb_stream_event(
        [
            # a write that holds no event (a step that produced none)
            ddb_stream_record("MODIFY", keys=keys, new_image=_operation_image(), table="payments-operations"),
            # a write that left the previous step's event alone (a retry counted): not published again
            ddb_stream_record(
                "MODIFY",
                keys=keys,
                old_image=_operation_image(**events),
                new_image=_operation_image(attempts={"N": "1"}, **events),
                table="payments-operations",
            ),
            # the item expired (TTL): nothing
            ddb_stream_record(
                "REMOVE", keys=keys, old_image=_operation_image(**events), table="payments-operations"
            ),
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
    assert steps_of(infra, operation_id)[-2:] == [("post-processing", "STARTED"), ("invoice", "REQUESTED")]
    # The invoice input derives from the operation (below the claim-check threshold: nothing in S3);
    # the event names its sha256, which the invoice worker's rebuild must match.
    (requested,) = infra.item_events(operation_id)
    assert requested.event_type == "InvoiceRequested" and requested.claim_check is None
    operation = infra.operation(operation_id)
    assert operation is not None
    document = invoice_input(
        operation, json.loads(operation.request.text or ""), {"paymentRef": stored["paymentRef"]}
    )
    assert document["operationId"] == operation_id
    assert document["paymentRef"] == stored["paymentRef"]
    assert document["amount"] == "12.50" and document["currency"] == "EUR"
    assert requested.payload == {"invoiceInputSha256": hashlib.sha256(canonical_bytes(document)).hexdigest()}
    assert "result" not in stored  # consumed: its part of the invoice input is the paymentRef
    assert infra.s3_keys() == []
    assert produced_event(infra, operation_id, "InvoiceRequested") == requested


def test_a_large_invoice_input_is_claim_checked_into_s3_and_invoiced_from_there(
    infra: Infrastructure, invoice_api: InvoiceApiFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    lower_claim_check_threshold(monkeypatch, 256)
    operation_id = accepted_operation(payment_request(details={"note": "n" * 300}))
    from payments.handlers import payment_worker

    payment_worker.handler(queued_event(infra, "payment-requests", expect=1), FakeContext())
    use(monkeypatch, infra, "post-processing")

    assert failed_ids(post_process(queued_event(infra, "post-processing", expect=1))) == []

    key = f"payments/{operation_id}/invoice-input.json"
    stored = infra.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    document = json.loads(stored)
    assert document["operationId"] == operation_id and document["amount"] == "12.50"
    requested = produced_event(infra, operation_id, "InvoiceRequested")
    assert requested.claim_check is not None and requested.claim_check.key == key
    assert requested.claim_check.sha256 == hashlib.sha256(stored).hexdigest()
    use(monkeypatch, infra, "invoice-requests")
    assert failed_ids(invoice(queued_event(infra, "invoice-requests", expect=1))) == []
    assert item(infra, operation_id)["status"] == "COMPLETED"
    assert invoice_api.invoices() == {f"{operation_id}:invoice": 1}


def test_a_tampered_claim_checked_result_is_parked_with_the_reason_and_changes_nothing(
    infra: Infrastructure, monkeypatch: pytest.MonkeyPatch
) -> None:
    lower_claim_check_threshold(monkeypatch, 64)  # the legacy system's answer goes to S3
    operation_id = pay(infra)
    key = item(infra, operation_id)["resultRef"]["key"]
    infra.s3.put_object(Bucket=BUCKET, Key=key, Body=b'{"paymentRef":"PAY-someone-else"}')
    use(monkeypatch, infra, "post-processing")
    before = item(infra, operation_id)

    response = post_process(queued_event(infra, "post-processing", expect=1))

    assert failed_ids(response) == []  # parked = acknowledged here
    (parked,) = infra.receive_all(infra.queues["post-processing"].dlq_url)
    assert parked["MessageAttributes"]["relay.errorClass"]["StringValue"] == "ClaimCheckMismatch"
    assert key in parked["MessageAttributes"]["relay.errorMessage"]["StringValue"]
    assert item(infra, operation_id) == before, "still PAYMENT_COMPLETED, nothing written"


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
    assert produced_types(infra, operation_id).count("InvoiceRequested") == 1


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
        payload={},
        correlation_id="c",
    )

    response = post_process(deliver(infra, "post-processing", bogus))

    assert failed_ids(response) == []
    (parked,) = infra.receive_all(infra.queues["post-processing"].dlq_url)
    assert parked["MessageAttributes"]["relay.errorClass"]["StringValue"] == "IllegalTransition"
    assert item(infra, operation_id)["status"] == "PENDING"
    assert bogus.event_id not in item(infra, operation_id)["seen"], "not recorded as processed"


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
    assert steps_of(infra, operation_id)[-1] == ("invoice", "COMPLETED")
    assert abs(int(stored["expiresAt"]) - (datetime.now(UTC) + timedelta(days=30)).timestamp()) < 60
    assert invoice_api.invoices() == {f"{operation_id}:invoice": 1}
    done = produced_event(infra, operation_id, "OperationCompleted")
    assert done.payload == {"invoiceId": stored["invoiceId"], "paymentRef": stored["paymentRef"]}
    assert infra.item_events(operation_id) == [done]


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
    """The operation stays INVOICE_PENDING when the step dies between the invoice API's answer and its
    one write; the redelivery asks the API again with the SAME key (``{operationId}:invoice``), and
    the API's own idempotency answers the invoice it issued, never a second one."""
    from payments.store import OperationStore

    operation_id, event = invoice_pending(infra, monkeypatch)
    real_apply_one = OperationStore.apply_one

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("the process died before committing")

    monkeypatch.setattr(OperationStore, "apply_one", crash)
    assert failed_ids(invoice(event)) == [], "handled by re-sending a delayed copy"
    monkeypatch.setattr(OperationStore, "apply_one", real_apply_one)
    assert item(infra, operation_id)["status"] == "INVOICE_PENDING"
    assert invoice_api.invoices() == {f"{operation_id}:invoice": 1}

    response = invoice(event)

    assert failed_ids(response) == []
    stored = item(infra, operation_id)
    assert stored["status"] == "COMPLETED"
    assert invoice_api.invoices() == {f"{operation_id}:invoice": 1}, "the same key: the same invoice"
    assert invoice_api.invoices_by_operation() == {operation_id: 1}
    assert (
        produced_event(infra, operation_id, "OperationCompleted").payload["invoiceId"] == stored["invoiceId"]
    )


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
