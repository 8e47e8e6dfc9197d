"""POST /operations/{operationId}/cancel: PENDING -> CANCELLED (+ OperationCancelled), 409 once the
payment was submitted, the same answer again, 404 for an unknown id; and the cancel/worker race decided
by conditional writes, both ways, never charging a cancelled operation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from local.fakes.legacy_payments import LegacyPaymentsFake
from tests.builders import FakeContext
from tests.handlers.payments.builders import (
    _context,
    accepted_operation,
    body_of,
    failed_ids,
    http_event,
    payment_request,
    produced_types,
    queued_event,
)
from tests.handlers.payments.pipeline import Infrastructure, Pump


def cancel(operation_id: str, body: Any = None, *, raw: str | None = None) -> dict[str, Any]:
    from payments.handlers import api

    text = raw if raw is not None else (json.dumps(body) if body is not None else None)
    return api.handler(http_event("POST", f"/operations/{operation_id}/cancel", body=text), _context())


def run_worker(event: dict[str, Any]) -> dict[str, Any]:
    from payments.handlers import payment_worker

    return payment_worker.handler(event, FakeContext())


def test_a_pending_operation_is_cancelled_with_the_reason_a_ttl_and_an_operation_cancelled_event(
    infra: Infrastructure,
) -> None:
    operation_id = accepted_operation(payment_request())

    response = cancel(operation_id, {"reason": "order changed"})

    assert response["statusCode"] == 200, response
    view = body_of(response)
    assert view["status"] == "CANCELLED"
    assert view["error"] == {"code": "Cancelled", "message": "order changed"}
    assert [(s["step"], s["status"]) for s in view["steps"]] == [
        ("request", "ACCEPTED"),
        ("request", "CANCELLED"),
    ]
    item = infra.operation_item(operation_id)
    assert item is not None and item["status"] == "CANCELLED"
    assert item.get("expiresAt") is not None, "a terminal state has a TTL"
    # ONE write: the state change and its event, in the item (no outbox row).
    (event,) = infra.item_events(operation_id)
    assert event.event_type == "OperationCancelled"
    assert event.ids["operationId"] == operation_id and event.ids["orderId"] == "ord-42"
    assert event.payload == {"reason": "order changed"}
    assert produced_types(infra, operation_id) == ["OperationCancelled", "PaymentRequested"]
    assert infra.outbox_rows(operation_id) == []
    # Out of the sweeper's index once its last event is out (until then the sweeper would re-publish it).
    assert item["dueShard"] and item["dueAt"]
    Pump(infra).publish_outbox()
    settled = infra.operation_item(operation_id)
    assert settled is not None and not {"dueShard", "dueAt", "deadlineShard", "deadlineAt"} & set(settled)


def test_the_body_is_optional(infra: Infrastructure) -> None:
    operation_id = accepted_operation(payment_request())

    response = cancel(operation_id)

    assert response["statusCode"] == 200, response
    assert body_of(response)["error"]["message"] == "cancelled by the client"


def test_a_repeated_cancel_gets_the_same_answer_without_a_second_event(infra: Infrastructure) -> None:
    operation_id = accepted_operation(payment_request())
    first = cancel(operation_id, {"reason": "changed"})
    before = infra.operation_item(operation_id)

    again = cancel(operation_id, {"reason": "changed"})

    assert again["statusCode"] == 200 and body_of(again) == body_of(first)
    assert infra.operation_item(operation_id) == before, "nothing written again"
    assert produced_types(infra, operation_id) == ["OperationCancelled", "PaymentRequested"]


def test_an_unknown_operation_is_404(infra: Infrastructure) -> None:
    response = cancel("no-such-operation")

    assert response["statusCode"] == 404
    assert body_of(response)["error"] == "OperationNotFound"


@pytest.mark.parametrize(
    "body",
    ['{"reason": ""}', '{"reason": 5}', '{"why": "x"}', "not json", "[1]", '{"reason": "' + "x" * 501 + '"}'],
)
def test_an_invalid_body_is_400_and_nothing_changes(infra: Infrastructure, body: str) -> None:
    operation_id = accepted_operation(payment_request())

    response = cancel(operation_id, raw=body)

    assert response["statusCode"] == 400, response
    item = infra.operation_item(operation_id)
    assert item is not None and item["status"] == "PENDING"


def test_once_the_payment_was_submitted_a_cancel_is_409_with_the_state_and_why(
    infra: Infrastructure, legacy: LegacyPaymentsFake
) -> None:
    operation_id = accepted_operation(payment_request())
    assert failed_ids(run_worker(queued_event(infra, "payment-requests", expect=1))) == []

    response = cancel(operation_id)

    assert response["statusCode"] == 409, response
    error = body_of(response)
    assert error["error"] == "OperationNotCancellable"
    assert "is PAYMENT_COMPLETED" in error["message"] and "Only a PENDING operation" in error["message"]
    assert legacy.charges_by_operation() == {operation_id: 1}


def test_a_cancel_that_wins_the_race_means_the_worker_never_charges(
    infra: Infrastructure, legacy: LegacyPaymentsFake
) -> None:
    operation_id = accepted_operation(payment_request())
    event = queued_event(infra, "payment-requests", expect=1)
    assert cancel(operation_id)["statusCode"] == 200

    assert failed_ids(run_worker(event)) == []  # acknowledged, not parked

    assert legacy.charges_by_operation().get(operation_id) is None
    assert legacy.calls() == []
    item = infra.operation_item(operation_id)
    assert item is not None and item["status"] == "CANCELLED"


def test_a_cancel_landing_between_the_workers_read_and_its_submission_still_prevents_the_charge(
    infra: Infrastructure, legacy: LegacyPaymentsFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker has read PENDING; the cancel commits before the worker's conditional
    # PENDING -> PAYMENT_PROCESSING, which then fails: the worker re-reads and does not call.
    from payments.store import OperationStore

    operation_id = accepted_operation(payment_request())
    event = queued_event(infra, "payment-requests", expect=1)
    real_get = OperationStore.get_operation
    cancelled: list[int] = []

    def get_then_cancel(self: OperationStore, wanted: str) -> Any:
        found = real_get(self, wanted)
        if not cancelled and found is not None and str(found.status) == "PENDING":
            monkeypatch.setattr(OperationStore, "get_operation", real_get)  # the cancel reads normally
            cancelled.append(cancel(operation_id)["statusCode"])
        return found

    monkeypatch.setattr(OperationStore, "get_operation", get_then_cancel)

    assert failed_ids(run_worker(event)) == []

    assert cancelled == [200]
    assert legacy.calls() == [], "the legacy system was called for a cancelled operation"
    item = infra.operation_item(operation_id)
    assert item is not None and item["status"] == "CANCELLED"


def test_a_worker_that_wins_the_race_makes_the_cancel_a_409(
    infra: Infrastructure, legacy: LegacyPaymentsFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cancel has read PENDING; the worker's PENDING -> PAYMENT_PROCESSING commits first: the
    # cancel's conditional write fails, it reads again and answers 409.
    from payments.store import OperationStore

    operation_id = accepted_operation(payment_request())
    event = queued_event(infra, "payment-requests", expect=1)
    real_get = OperationStore.get_operation
    worked: list[bool] = []

    def get_then_work(self: OperationStore, wanted: str) -> Any:
        found = real_get(self, wanted)
        if not worked and found is not None and str(found.status) == "PENDING":
            worked.append(True)
            monkeypatch.setattr(OperationStore, "get_operation", real_get)
            assert failed_ids(run_worker(event)) == []
        return found

    monkeypatch.setattr(OperationStore, "get_operation", get_then_work)

    response = cancel(operation_id)

    assert worked == [True]
    assert response["statusCode"] == 409, response
    assert legacy.charges_by_operation() == {operation_id: 1}
    item = infra.operation_item(operation_id)
    assert item is not None and item["status"] == "PAYMENT_COMPLETED"
    assert "OperationCancelled" not in produced_types(infra, operation_id)
