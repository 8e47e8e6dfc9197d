"""Analytics: every order event as one S3 object per eventId, whatever SQS redelivers."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from relay.envelope import Envelope, new_envelope
from tests.handlers.orders.world import ANALYTICS, BUCKET, OrdersWorld, deliver, failed_ids

AT = datetime(2024, 5, 1, 23, 30, tzinfo=UTC)


def event(event_type: str = "OrderCreated", order_id: str = "ord-1", **payload: object) -> Envelope:
    return new_envelope(
        event_type,
        identity=[order_id, event_type],
        ids={"orderId": order_id},
        payload={"customerId": "cust-7", **payload},
        correlation_id="corr-1",
        occurred_at=AT,
    )


def test_each_event_is_one_object_under_its_day_type_and_event_id(world: OrdersWorld) -> None:
    created, paid = event("OrderCreated"), event("OrderPaid", operationId="op-1")

    response = deliver(world, ANALYTICS, created, paid)  # raw delivery: the body is the envelope

    assert failed_ids(response) == []
    archived = world.archived()
    assert sorted(archived) == sorted(
        [
            f"events/dt=2024-05-01/OrderCreated/{created.event_id}.json",
            f"events/dt=2024-05-01/OrderPaid/{paid.event_id}.json",
        ]
    )
    stored = archived[f"events/dt=2024-05-01/OrderCreated/{created.event_id}.json"]
    assert stored.endswith(b"\n") and stored.count(b"\n") == 1  # one JSON line
    assert Envelope.from_json(stored) == created


def test_the_day_is_the_utc_date_of_occurred_at(world: OrdersWorld) -> None:
    late = new_envelope(
        "OrderCreated",
        identity=["ord-2", "created"],
        ids={"orderId": "ord-2"},
        payload={"customerId": "c"},
        correlation_id="corr-2",
        occurred_at=datetime.fromisoformat("2024-05-02T01:30:00+02:00"),  # 2024-05-01T23:30Z
    )

    deliver(world, ANALYTICS, late)

    assert list(world.archived()) == [f"events/dt=2024-05-01/OrderCreated/{late.event_id}.json"]


def test_redelivery_is_acknowledged_and_leaves_the_object_untouched(world: OrdersWorld) -> None:
    created = event()
    deliver(world, ANALYTICS, created)
    key = f"events/dt=2024-05-01/OrderCreated/{created.event_id}.json"
    first = world.s3.head_object(Bucket=BUCKET, Key=key)

    response = deliver(world, ANALYTICS, created, created, times=2)

    assert failed_ids(response) == []
    assert world.parked(ANALYTICS) == []
    again = world.s3.head_object(Bucket=BUCKET, Key=key)
    assert (again["ETag"], again["LastModified"]) == (first["ETag"], first["LastModified"])
    assert len(world.archived()) == 1


def test_same_event_id_with_a_different_payload_is_parked_as_payload_conflict_and_not_overwritten(
    world: OrdersWorld,
) -> None:
    original = event(currency="EUR")
    deliver(world, ANALYTICS, original)
    conflicting = event(currency="USD")
    assert conflicting.event_id == original.event_id

    response = deliver(world, ANALYTICS, conflicting)

    assert failed_ids(response) == []
    assert world.parked_reasons(ANALYTICS) == ["PayloadConflict"]
    (stored,) = world.archived().values()
    assert json.loads(stored)["payload"]["currency"] == "EUR"


def test_sns_enveloped_delivery_is_archived_the_same_way(world: OrdersWorld) -> None:
    from tests.builders import sns_wrapped

    created = event()

    deliver(world, ANALYTICS, sns_wrapped(created, topic="order-events"))

    assert list(world.archived()) == [f"events/dt=2024-05-01/OrderCreated/{created.event_id}.json"]
