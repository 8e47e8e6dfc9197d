"""``python -m ops republish-order ID --reason …``: orders have no sweeper, so when the stream's retries
for a batch are spent, the events are still in the order item (``ev``) and this command puts them out
as the stream publisher would: on ``order-events`` with the attributes the filters match, and on the
bus for integration events. Consumers dedupe on the eventId; every re-publish is audited."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.handlers.orders.api_client import placed_order
from tests.handlers.orders.world import INVENTORY, NOTIFICATIONS, ORDERS_TABLE, OrdersWorld


def world_app(world: OrdersWorld) -> Any:
    from ops.app import App

    class WorldApp(App):
        def name(self, service: str, short: str) -> str:
            return ORDERS_TABLE if (service, short) == ("orders", "orders") else super().name(service, short)

    return WorldApp(stage="dev", region="us-east-1", endpoint_url=None)


def event_ids(world: OrdersWorld, queue: str) -> list[str]:
    ids = []
    for message in world.receive_all(world.queues[queue].url):
        body = json.loads(message["Body"])
        envelope = json.loads(body["Message"]) if "Message" in body and "TopicArn" in body else body
        ids.append(envelope["eventId"])
    return ids


@pytest.fixture
def audit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    from ops import lookup

    path = tmp_path / "republish-audit.jsonl"
    monkeypatch.setattr(lookup, "REPUBLISH_AUDIT_FILE", path)
    return path


def test_an_orders_last_event_is_published_again_from_the_item_and_audited(
    world: OrdersWorld, audit: Path
) -> None:
    from ops.lookup import republish_order

    env = world.env()
    order_id = placed_order()  # its stream record never reaches the publisher in this world
    (created,) = world.outbox(order_id)
    assert event_ids(world, INVENTORY) == []

    record = republish_order(world_app(world), order_id, reason="stream batch given up", publisher_env=env)

    assert record["republished"] == [{"eventType": "OrderCreated", "eventId": created.event_id}]
    # Where the stream publisher would have put it, through the same filters.
    assert event_ids(world, INVENTORY) == [created.event_id]
    assert event_ids(world, NOTIFICATIONS) == [created.event_id]
    assert list(world.archive().events) == [created.event_id]  # and the analytics archive
    (line,) = audit.read_text().splitlines()
    assert json.loads(line)["reason"] == "stream batch given up" and json.loads(line)["orderId"] == order_id


def test_a_republish_needs_a_reason_and_an_order(world: OrdersWorld, audit: Path) -> None:
    from ops.lookup import RepublishRefused, republish_order

    env = world.env()
    with pytest.raises(RepublishRefused, match="--reason"):
        republish_order(world_app(world), placed_order(), reason=" ", publisher_env=env)
    with pytest.raises(RepublishRefused, match="no order"):
        republish_order(world_app(world), "no-such-order", reason="x", publisher_env=env)
    assert not audit.exists()
