"""Issue 33 item 4: an operation item stays under 1 KB on the common path, a payment for an order
included, so each of its writes bills one write unit. Measured on every image the table's stream
carries (DynamoDB bills a write by the larger of the two), by DynamoDB's documented size rule."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from local.fakes.invoice_api import InvoiceApiFake
from local.fakes.legacy_payments import LegacyPaymentsFake
from tests.ddb_item_size import KB, item_size, parts
from tests.handlers.payments.builders import body_of, post_payment
from tests.handlers.payments.pipeline import (
    OPERATIONS_TABLE,
    Infrastructure,
    Pump,
    moto_transactions_without_table_snapshots,
)


@pytest.mark.parametrize(
    "order_id", [str(uuid.uuid4()), None], ids=["a payment for an order", "a payment on its own"]
)
def test_every_version_of_an_operation_item_is_under_1_kb(
    infra: Infrastructure,
    legacy: LegacyPaymentsFake,
    invoice_api: InvoiceApiFake,
    fast_retries: None,
    order_id: str | None,
) -> None:
    # The bench's payment, with payer and payee names 20 characters longer: some headroom is the point.
    request: dict[str, Any] = {
        "paymentId": f"cost-{uuid.uuid4().hex[:10]}",
        "amount": "10.00",
        "currency": "EUR",
        "payer": "acct-payer-0000000000000000001",
        "payee": "acct-payee-0000000000000000009",
        "details": {},
    }
    if order_id:
        request["orderId"] = order_id
    operation_id = body_of(post_payment(request, idempotency_key=uuid.uuid4().hex))["operationId"]
    pump = Pump(infra, deliveries=1)
    images: list[dict[str, Any]] = []
    publisher = pump.publisher

    def watching(event: dict[str, Any], context: Any) -> dict[str, Any]:
        images.extend(r["dynamodb"]["NewImage"] for r in event["Records"] if "NewImage" in r["dynamodb"])
        return publisher(event, context)

    pump.publisher = watching
    with moto_transactions_without_table_snapshots():
        pump.run(max_rounds=30)

    statuses = [image["status"]["S"] for image in images]
    assert statuses[0] == "PENDING" and statuses[-1] == "COMPLETED", statuses
    assert "INVOICE_PENDING" in statuses, "the largest state was not measured"
    too_large = {i["status"]["S"]: (item_size(i), parts(i)[:6]) for i in images if item_size(i) > KB}
    assert too_large == {}
    # What the item left to itself came back whole in what was published.
    for event in infra.produced_events(operation_id):
        assert event.ids["operationId"] == operation_id
        assert event.ids["paymentId"] == request["paymentId"]
        assert event.ids.get("orderId") == order_id
        assert event.correlation_id


def test_an_operation_the_version_before_wrote_whole_is_read_and_completed(
    infra: Infrastructure,
    legacy: LegacyPaymentsFake,
    invoice_api: InvoiceApiFake,
    fast_retries: None,
) -> None:
    """Issue 33 item 6: an item written before the item left its repeats out -- the request inline
    whole, its event with every id -- is read, completed and published as before."""
    from relay.claim_check import canonical_bytes
    from relay.ddb import deserialize_item, serialize_item
    from relay.entity_events import compact, events_in

    request = {
        "paymentId": f"pay-{uuid.uuid4().hex[:8]}",
        "orderId": str(uuid.uuid4()),
        "amount": "10.00",
        "currency": "EUR",
        "payer": "acct-payer-1",
        "payee": "acct-payee-9",
        "details": {},
    }
    operation_id = body_of(post_payment(request, idempotency_key=uuid.uuid4().hex))["operationId"]
    key = {"pk": {"S": f"OPERATION#{operation_id}"}, "sk": {"S": "OPERATION"}}
    item = deserialize_item(infra.ddb.get_item(TableName=OPERATIONS_TABLE, Key=key)["Item"])
    item["request"] = canonical_bytes(request).decode()
    item["ev"] = [compact(e) for e in events_in(item)]
    infra.ddb.put_item(TableName=OPERATIONS_TABLE, Item=serialize_item(item))
    assert json.loads(item["ev"][0])["d"]["orderId"] == request["orderId"]

    operation = infra.operation(operation_id)
    assert operation is not None and json.loads(operation.request.text or "") == request
    with moto_transactions_without_table_snapshots():
        Pump(infra, deliveries=1).run(max_rounds=30)

    assert infra.operation_item(operation_id)["status"] == "COMPLETED"  # type: ignore[index]
    assert legacy.charges_by_operation() == {operation_id: 1}
    produced = infra.produced_events(operation_id)
    assert {"PaymentRequested", "PaymentCompleted"} <= {e.event_type for e in produced}
    for event in produced:
        assert event.ids["orderId"] == request["orderId"] and event.ids["operationId"] == operation_id
