"""The payment worker: PaymentRequested / PaymentStatusCheckDue -> legacy payment system."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from payments.store import result_of

from local.fakes.legacy_payments import LegacyPaymentsFake
from tests.builders import FakeContext
from tests.handlers.payments.builders import (
    accepted_operation,
    body_of,
    deliver,
    failed_ids,
    get_operation,
    lower_claim_check_threshold,
    payment_request,
    produced_event,
    produced_types,
    queued_event,
    set_item_attributes,
    steps_of,
)
from tests.handlers.payments.pipeline import (
    BUCKET,
    IDEMPOTENCY_TABLE,
    OPERATIONS_TABLE,
    Infrastructure,
    lambda_sqs_event,
)


def run(event: dict[str, Any]) -> dict[str, Any]:
    from payments.handlers import payment_worker

    return payment_worker.handler(event, FakeContext())


def requested(infra: Infrastructure, **request: Any) -> tuple[str, dict[str, Any]]:
    operation_id = accepted_operation(payment_request(**request))
    return operation_id, queued_event(infra, "payment-requests", expect=1)


def status(infra: Infrastructure, operation_id: str) -> str:
    item = infra.operation_item(operation_id)
    assert item is not None
    return str(item["status"])


def dlq(infra: Infrastructure) -> list[dict[str, Any]]:
    return infra.receive_all(infra.queues["payment-requests"].dlq_url)


class SqsSpy:
    """Wraps the runtime's SQS client to record send_message calls."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.sent: list[dict[str, Any]] = []

    def send_message(self, **kwargs: Any) -> Any:
        self.sent.append(kwargs)
        return self.real.send_message(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def spy_sqs() -> SqsSpy:
    from payments.wiring import wiring

    rt = wiring()
    spy = SqsSpy(rt.sqs)
    rt.__dict__["sqs"] = spy
    return spy


def test_completed_payment_is_one_write_of_state_result_processed_event_and_next_event(
    infra: Infrastructure, legacy: LegacyPaymentsFake
) -> None:
    operation_id, event = requested(infra)
    requested_event = produced_event(infra, operation_id, "PaymentRequested")

    response = run(event)

    assert failed_ids(response) == []
    item = infra.operation_item(operation_id)
    assert item is not None
    assert item["status"] == "PAYMENT_COMPLETED" and item["version"] == 3
    assert steps_of(infra, operation_id) == [
        ("request", "ACCEPTED"),
        ("payment", "STARTED"),
        ("payment", "COMPLETED"),
    ]
    assert item["paymentRef"].startswith("PAY-")
    # The legacy system's answer, kept in the operation (below the claim-check threshold).
    operation = infra.operation(operation_id)
    assert operation is not None and operation.result is not None and operation.result.ref is None
    stored = json.loads(operation.result.text or "")
    # Kept without what the operation holds already (its id, the paymentRef, the legacy key)...
    assert not {"operationId", "paymentRef", "idempotencyKey"} & set(stored)
    # ...and read back whole.
    result = result_of(operation, stored)
    assert result["operationId"] == operation_id and result["paymentRef"] == item["paymentRef"]
    assert result["idempotencyKey"] == f"{operation_id}:payment" and result["status"] == "COMPLETED"
    assert infra.s3_keys() == []
    # The next event in the same write, and the event it processed recorded in the item: no marker
    # in the idempotency table, no outbox row.
    (completed,) = infra.item_events(operation_id)
    assert completed.event_type == "PaymentCompleted" and completed.claim_check is None
    assert completed.ids["paymentRef"] == item["paymentRef"]
    assert completed.causation_id == requested_event.event_id
    assert set(item["seen"]) == {requested_event.event_id}
    assert infra.ddb.scan(TableName=IDEMPOTENCY_TABLE)["Items"] == []
    assert infra.outbox_rows(operation_id) == []
    assert legacy.charges_by_operation() == {operation_id: 1}
    assert legacy.charges() == {f"{operation_id}:payment": 1}


def test_a_large_result_is_claim_checked_into_s3_with_its_sha256(
    infra: Infrastructure, legacy: LegacyPaymentsFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    lower_claim_check_threshold(monkeypatch, 64)
    operation_id, event = requested(infra)

    assert failed_ids(run(event)) == []

    item = infra.operation_item(operation_id)
    assert item is not None and item["status"] == "PAYMENT_COMPLETED" and "result" not in item
    key = f"payments/{operation_id}/result.json"
    assert item["resultRef"]["key"] == key
    stored = infra.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    assert hashlib.sha256(stored).hexdigest() == item["resultRef"]["sha256"]
    operation = infra.operation(operation_id)
    assert operation is not None
    assert result_of(operation, json.loads(stored))["paymentRef"] == item["paymentRef"]
    view = body_of(get_operation(operation_id))
    assert view["results"]["result"] == f"s3://{BUCKET}/{key}"


def test_duplicate_delivery_is_acknowledged_without_second_effect(
    infra: Infrastructure, legacy: LegacyPaymentsFake
) -> None:
    operation_id, event = requested(infra)
    run(event)
    calls_after_first = len(legacy.calls())
    item_after_first = infra.operation_item(operation_id)

    response = run(event)

    assert failed_ids(response) == []
    assert len(legacy.calls()) == calls_after_first
    assert infra.operation_item(operation_id) == item_after_first
    assert produced_types(infra, operation_id).count("PaymentCompleted") == 1


def test_the_same_event_id_with_another_payload_is_a_payload_conflict_parked_and_never_applied(
    infra: Infrastructure, legacy: LegacyPaymentsFake
) -> None:
    operation_id, event = requested(infra)
    run(event)
    before = infra.operation_item(operation_id)
    calls = len(legacy.calls())
    original = produced_event(infra, operation_id, "PaymentRequested")
    conflicting = original.model_copy(update={"payload": {"amount": "999999.00"}})

    response = run(deliver(infra, "payment-requests", conflicting))

    assert failed_ids(response) == []
    (parked,) = dlq(infra)
    assert parked["MessageAttributes"]["relay.errorClass"]["StringValue"] == "PayloadConflict"
    assert infra.operation_item(operation_id) == before
    assert len(legacy.calls()) == calls


def test_crash_after_commit_before_acknowledgement_charges_nothing_more_on_redelivery(
    infra: Infrastructure, legacy: LegacyPaymentsFake
) -> None:
    operation_id, event = requested(infra)
    run(event)  # committed; the acknowledgement is "lost": the message is never deleted

    response = run(event)  # SQS hands the same message out again after its visibility timeout

    assert failed_ids(response) == []
    assert legacy.charges_by_operation()[operation_id] == 1
    assert status(infra, operation_id) == "PAYMENT_COMPLETED"


def test_crash_after_the_charge_before_the_commit_is_redone_without_second_charge(
    infra: Infrastructure, legacy: LegacyPaymentsFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    from payments.store import OperationStore

    operation_id, event = requested(infra)
    real_apply_one = OperationStore.apply_one
    writes: list[Any] = []

    def crash_at_the_commit(self: OperationStore, write: Any, *args: Any, **kwargs: Any) -> Any:
        writes.append(write)
        if len(writes) == 2:  # PENDING -> PAYMENT_PROCESSING went through; the charge happened
            raise ConnectionError("the process died before committing")
        return real_apply_one(self, write, *args, **kwargs)

    monkeypatch.setattr(OperationStore, "apply_one", crash_at_the_commit)
    first = run(event)
    assert failed_ids(first) == [], "handled by re-sending a delayed copy (retry budget in time)"
    assert status(infra, operation_id) == "PAYMENT_PROCESSING"
    assert legacy.charges_by_operation() == {operation_id: 1}

    monkeypatch.setattr(OperationStore, "apply_one", real_apply_one)
    second = run(event)

    assert failed_ids(second) == []
    assert status(infra, operation_id) == "PAYMENT_COMPLETED"
    assert legacy.charges_by_operation()[operation_id] == 1
    assert produced_types(infra, operation_id).count("PaymentCompleted") == 1


def test_legacy_timeout_is_never_retried_blind_but_reconciled(
    infra: Infrastructure, legacy: LegacyPaymentsFake
) -> None:
    operation_id, event = requested(infra)
    legacy.set_knobs(timeout_rate=1.0)

    first = run(event)

    # The request may have reached the legacy system: ask it (RECONCILING), do not POST again.
    assert failed_ids(first) == []
    assert status(infra, operation_id) == "RECONCILING"
    assert legacy.charges_by_operation() == {}
    assert [c["method"] for c in legacy.calls()] == ["POST"]


def test_legacy_reply_lost_after_the_charge_is_reconciled_without_second_charge(
    infra: Infrastructure, legacy: LegacyPaymentsFake
) -> None:
    operation_id, event = requested(infra)
    legacy.set_knobs(fail_after_commit_rate=1.0, fail_after_commit_mode="drop")

    first = run(event)
    legacy.set_knobs(fail_after_commit_rate=0.0)

    assert failed_ids(first) == []
    assert status(infra, operation_id) == "RECONCILING"
    assert legacy.charges_by_operation() == {operation_id: 1}


def test_legacy_outage_is_retried_later_instead_of_failing_the_operation(
    infra: Infrastructure, legacy: LegacyPaymentsFake
) -> None:
    operation_id, event = requested(infra)
    legacy.set_knobs(outage=True)

    response = run(event)

    # Handled: a delayed copy of the message carries the retry, and the operation says when.
    assert failed_ids(response) == []
    item = infra.operation_item(operation_id)
    assert item is not None and item["status"] == "PAYMENT_PROCESSING"
    assert item["attempts"] == 1 and item["nextAttemptAt"]
    assert dlq(infra) == []


def test_rejected_payment_fails_the_operation_announces_it_and_is_not_parked(
    infra: Infrastructure, legacy: LegacyPaymentsFake
) -> None:
    legacy.set_knobs(reject_payers=frozenset({"acct-blocked"}))
    operation_id, event = requested(infra, payer="acct-blocked")

    response = run(event)

    assert failed_ids(response) == []
    assert dlq(infra) == []
    item = infra.operation_item(operation_id)
    assert item is not None
    assert item["status"] == "FAILED"
    assert item["error"]["code"] == "PaymentRejected" and "acct-blocked" in item["error"]["message"]
    assert steps_of(infra, operation_id)[-1] == ("payment", "FAILED")
    expected_expiry = (datetime.now(UTC) + timedelta(days=90)).timestamp()
    assert abs(int(item["expiresAt"]) - expected_expiry) < 60
    failed = produced_event(infra, operation_id, "PaymentFailed")
    assert failed.payload == {"code": "PaymentRejected", "reason": item["error"]["message"]}
    assert legacy.charges_by_operation() == {}


def test_accepted_still_processing_schedules_a_delayed_status_check_with_backoff(
    infra: Infrastructure, legacy: LegacyPaymentsFake
) -> None:
    legacy.set_knobs(accept_then_complete_after=5)
    operation_id, event = requested(infra)
    spy = spy_sqs()

    response = run(event)

    assert failed_ids(response) == []
    item = infra.operation_item(operation_id)
    assert item is not None and item["status"] == "PAYMENT_PROCESSING" and item["paymentAcceptedAt"]
    (check,) = spy.sent
    assert check["QueueUrl"] == infra.queues["payment-requests"].url
    assert 30 <= check["DelaySeconds"] <= 900
    assert '"eventType":"PaymentStatusCheckDue"' in check["MessageBody"]
    assert '"attempt":1' in check["MessageBody"]


def test_status_checks_continue_until_the_payment_completes_and_charge_once(
    infra: Infrastructure, legacy: LegacyPaymentsFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    from relay.wiring import reset_all

    monkeypatch.setenv("PAYMENT_CHECK_BASE_DELAY_SECONDS", "0")
    reset_all()
    legacy.set_knobs(accept_then_complete_after=3)
    operation_id, event = requested(infra)
    queue = infra.queues["payment-requests"]

    run(event)
    run(event)  # every delivery twice: the duplicate must not start a second check chain
    checks = 0
    while status(infra, operation_id) == "PAYMENT_PROCESSING":
        messages = infra.receive_all(queue.url)
        assert len(messages) == 1, "exactly one status check is pending at a time"
        check_event = lambda_sqs_event(messages, queue)
        run(check_event)
        run(check_event)
        checks += 1
        assert checks < 5

    assert status(infra, operation_id) == "PAYMENT_COMPLETED"
    assert legacy.charges_by_operation() == {operation_id: 1}
    assert infra.receive_all(queue.url) == []


def test_payment_still_processing_after_the_maximum_age_is_reconciled_not_failed(
    infra: Infrastructure, legacy: LegacyPaymentsFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    legacy.set_knobs(accept_then_complete_after=100)
    operation_id, event = requested(infra)
    spy = spy_sqs()
    run(event)
    (check,) = spy.sent
    long_ago = (datetime.now(UTC) - timedelta(seconds=3601)).isoformat().replace("+00:00", "Z")
    infra.ddb.update_item(
        TableName="payments-operations",
        Key={"pk": {"S": f"OPERATION#{operation_id}"}, "sk": {"S": "OPERATION"}},
        UpdateExpression="SET paymentAcceptedAt = :t",
        ExpressionAttributeValues={":t": {"S": long_ago}},
    )

    response = run(deliver(infra, "payment-requests", check["MessageBody"]))

    assert failed_ids(response) == []
    item = infra.operation_item(operation_id)
    assert item is not None and item["status"] == "RECONCILING", "never FAILED while money may have moved"
    assert item["reconcileReason"].startswith("PaymentStillProcessing")
    assert "PaymentFailed" not in produced_types(infra, operation_id)
    (_, reconcile) = spy.sent
    assert '"eventType":"PaymentReconciliationDue"' in reconcile["MessageBody"]


def test_a_tampered_inline_request_is_caught_by_its_recorded_sha256_parked_and_changes_nothing(
    infra: Infrastructure, legacy: LegacyPaymentsFake
) -> None:
    operation_id, event = requested(infra)
    item = infra.operation_item(operation_id)
    assert item is not None
    tampered = json.loads(item["request"]) | {"amount": "999999.00"}
    set_item_attributes(
        infra, operation_id, request=json.dumps(tampered, sort_keys=True, separators=(",", ":"))
    )

    response = run(event)

    assert failed_ids(response) == []  # parked = acknowledged here
    (parked,) = dlq(infra)
    assert parked["MessageAttributes"]["relay.errorClass"]["StringValue"] == "ClaimCheckMismatch"
    assert "sha256" in parked["MessageAttributes"]["relay.errorMessage"]["StringValue"]
    assert parked["Body"] == event["Records"][0]["body"]
    assert status(infra, operation_id) == "PENDING"
    assert legacy.calls() == []


def test_tampered_claim_check_is_parked_with_the_reason_and_changes_nothing(
    infra: Infrastructure, legacy: LegacyPaymentsFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    lower_claim_check_threshold(monkeypatch, 256)
    operation_id, event = requested(infra, details={"note": "n" * 300})
    item = infra.operation_item(operation_id)
    assert item is not None
    key = item["requestRef"]["key"]
    infra.s3.put_object(Bucket=BUCKET, Key=key, Body=b'{"amount":"999999.00"}')

    response = run(event)

    assert failed_ids(response) == []  # parked = acknowledged here
    (parked,) = dlq(infra)
    assert parked["MessageAttributes"]["relay.errorClass"]["StringValue"] == "ClaimCheckMismatch"
    assert key in parked["MessageAttributes"]["relay.errorMessage"]["StringValue"]
    assert parked["Body"] == event["Records"][0]["body"]
    assert status(infra, operation_id) == "PENDING"
    assert legacy.calls() == []


def test_unparseable_message_is_parked(infra: Infrastructure, legacy: LegacyPaymentsFake) -> None:
    event = deliver(infra, "payment-requests", "{this is not an envelope")

    response = run(event)

    assert failed_ids(response) == []
    (parked,) = dlq(infra)
    assert parked["MessageAttributes"]["relay.errorClass"]["StringValue"] == "InvalidInput"
    assert legacy.calls() == []


def test_payment_requested_for_an_operation_already_past_payment_is_acknowledged_without_effect(
    infra: Infrastructure, legacy: LegacyPaymentsFake
) -> None:
    operation_id, event = requested(infra)
    run(event)
    # Even without the processed event recorded (a ``seen`` entry lost), the state says the step is done.
    infra.ddb.update_item(
        TableName=OPERATIONS_TABLE,
        Key={"pk": {"S": f"OPERATION#{operation_id}"}, "sk": {"S": "OPERATION"}},
        UpdateExpression="REMOVE #seen.#id",
        ExpressionAttributeNames={
            "#seen": "seen",
            "#id": produced_event(infra, operation_id, "PaymentRequested").event_id,
        },
    )
    assert infra.operation_item(operation_id)["seen"] == {}  # type: ignore[index]
    calls = len(legacy.calls())

    response = run(event)

    assert failed_ids(response) == []
    assert len(legacy.calls()) == calls
    assert dlq(infra) == []
