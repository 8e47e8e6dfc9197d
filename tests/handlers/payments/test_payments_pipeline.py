"""Done when: through the handlers against moto, 100 operations -- every message delivered twice, a
legacy outage in the middle -- all reach COMPLETED, each charged and invoiced exactly once."""

from __future__ import annotations

import os
from typing import Any

from local.fakes.invoice_api import InvoiceApiFake
from local.fakes.legacy_payments import LegacyPaymentsFake
from tests.handlers.payments.builders import body_of, payment_request, post_payment
from tests.handlers.payments.pipeline import Infrastructure, Pump, moto_transactions_without_table_snapshots

OPERATIONS = int(os.environ.get("PAYMENTS_PIPELINE_OPERATIONS", "100"))


def test_hundred_operations_with_duplicates_and_a_legacy_outage_all_complete_charged_and_invoiced_once(
    infra: Infrastructure, legacy: LegacyPaymentsFake, invoice_api: InvoiceApiFake, fast_retries: None
) -> None:
    # Some payments are "accepted, still processing" first: they go through delayed status checks.
    legacy.set_knobs(accept_then_complete_after=2)
    operation_ids = []
    for index in range(OPERATIONS):
        request = payment_request(paymentId=f"pay-{index:03d}")
        key = f"client-{index}"
        first = post_payment(request, idempotency_key=key)
        retry = post_payment(request, idempotency_key=key)  # the client retried: same operation
        assert first["statusCode"] == retry["statusCode"] == 202
        assert body_of(first)["operationId"] == body_of(retry)["operationId"]
        operation_ids.append(body_of(first)["operationId"])
        if index == OPERATIONS // 2:
            legacy.set_knobs(accept_then_complete_after=0)

    pump = Pump(infra, deliveries=2, publish_deliveries=2)
    payment_handler = pump.handlers["payment-requests"]
    batches = {"n": 0}
    # The first round receives every PaymentRequested (published twice): start the outage ~30% into
    # it and end it at ~60%, so charged, failing and not-yet-tried operations coexist.
    first_round = -(-2 * OPERATIONS // 10)
    outage_on, outage_off = max(1, first_round * 3 // 10), max(2, first_round * 6 // 10)

    def with_outage_in_the_middle(event: dict[str, Any], context: Any) -> dict[str, Any]:
        batches["n"] += 1
        if batches["n"] == outage_on:
            legacy.set_knobs(outage=True)
        if batches["n"] == outage_off:
            legacy.set_knobs(outage=False)
        return payment_handler(event, context)

    pump.handlers["payment-requests"] = with_outage_in_the_middle

    def all_terminal() -> bool:
        items = [infra.operation_item(op) for op in operation_ids]
        return all(i is not None and i["status"] in ("COMPLETED", "FAILED") for i in items)

    with moto_transactions_without_table_snapshots():
        pump.run(max_rounds=60)

    statuses = {op: (infra.operation_item(op) or {}).get("status") for op in operation_ids}
    assert set(statuses.values()) == {"COMPLETED"}, {
        s: list(statuses.values()).count(s) for s in set(statuses.values())
    }
    assert all_terminal()
    assert legacy.charges_by_operation() == dict.fromkeys(operation_ids, 1)
    assert invoice_api.invoices_by_operation() == dict.fromkeys(operation_ids, 1)
    outage_calls = [c for c in legacy.calls() if c.get("fault") == "outage"]
    assert outage_calls, "the outage never hit a call: the scenario did not test it"
    for queue in infra.queues.values():
        assert infra.receive_all(queue.dlq_url) == [], f"{queue.name}: nothing may be parked"
        assert infra.receive_all(queue.url) == []
