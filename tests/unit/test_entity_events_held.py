"""An event in its item leaves out what the item holds (``relay.entity_events.compact`` with
``held``) and gets it back from the item it is read with: a plain read, ALL_OLD, or a stream image."""

from __future__ import annotations

import json

import pytest
from boto3.dynamodb.types import TypeSerializer

from relay.entity_events import compact, events_in, expand, held_values, new_events
from relay.envelope import Envelope
from tests.builders import envelope

OPERATION = "8a4222e7-abfc-56d0-b4f0-0a35b208533c"
ORDER = "912a9627-9976-4cac-8cc6-e89404dd169d"
ITEM = {"pk": f"OPERATION#{OPERATION}", "sk": "OPERATION", "paymentId": "pay-1", "orderId": ORDER}
NAMES = ("operationId", "paymentId", "orderId", "correlationId")


def _event() -> Envelope:
    ids = {"operationId": OPERATION, "paymentId": "pay-1", "orderId": ORDER, "paymentRef": "PAY-9"}
    return envelope("PaymentCompleted", ids=ids, correlation_id=OPERATION, payload={"amount": "1.00"})


def test_what_the_item_holds_is_left_out_and_read_back_from_it_whole() -> None:
    event = _event()
    held = held_values(ITEM, NAMES)
    # The operationId and the correlation id are the id in the item's key; the rest its attributes.
    assert held == {
        "operationId#": OPERATION,
        "paymentId": "pay-1",
        "orderId": ORDER,
        "correlationId#": OPERATION,
    }

    text = compact(event, held)
    stored = json.loads(text)
    assert stored["d"] == {"paymentRef": "PAY-9"} and "c" not in stored
    assert stored["x"] == "operationId# paymentId orderId c#"
    assert len(text) < len(compact(event)) - 120

    assert expand(text, ITEM) == event
    assert list(expand(text, ITEM).ids) == ["operationId", "paymentId", "orderId", "paymentRef"]
    assert events_in({**ITEM, "ev": [text]}) == [event]
    image = {k: TypeSerializer().serialize(v) for k, v in {**ITEM, "ev": [text]}.items()}
    record = {"eventName": "MODIFY", "dynamodb": {"NewImage": image, "OldImage": {}}}
    assert new_events(record) == [event]


def test_only_what_equals_the_item_is_left_out() -> None:
    event = _event()
    other = {**ITEM, "paymentId": "pay-2", "correlationId": "req-7"}
    stored = json.loads(compact(event, held_values(other, NAMES)))
    assert stored["d"] == {"paymentId": "pay-1", "paymentRef": "PAY-9"}
    assert stored["c"] == OPERATION and stored["x"] == "operationId# orderId"
    assert expand(json.dumps(stored), other) == event


def test_an_event_written_whole_reads_without_its_item_and_one_left_to_an_item_does_not() -> None:
    event = _event()
    assert expand(compact(event)) == event
    assert expand(event.to_json()) == event
    with pytest.raises(ValueError, match="leaves paymentId to its item"):
        expand(compact(event, held_values(ITEM, NAMES)), {"pk": "OPERATION#x"})
