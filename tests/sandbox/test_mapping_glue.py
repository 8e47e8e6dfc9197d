"""The sandbox's event-source-mapping glue, without an emulator: stream lanes, the duplicate-delivery
switch and Lambda's reading of a batch response."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from local.mappings import DuplicateDelivery, StreamMapping, _Lane, failed_item_ids
from local.runtime import InvokeResult


def record(pk: str, seq: int) -> dict[str, Any]:
    return {"dynamodb": {"Keys": {"pk": {"S": pk}, "sk": {"S": "x"}}, "SequenceNumber": str(seq)}}


def lane_router(lanes: int) -> StreamMapping:
    mapping = StreamMapping.__new__(StreamMapping)  # no emulator: only the routing is exercised
    mapping.lanes = lanes
    mapping.hash_key = "pk"
    return mapping


def test_a_partition_key_always_lands_in_the_same_lane_and_keys_spread_over_lanes() -> None:
    router = lane_router(5)
    lanes = {router._lane_of(record(f"OPERATION#{i}", i)) for i in range(200)}
    assert lanes == set(range(5))
    for i in range(50):
        first = router._lane_of(record(f"OPERATION#{i}", 1))
        assert all(router._lane_of(record(f"OPERATION#{i}", seq)) == first for seq in range(2, 6))
    assert lane_router(1)._lane_of(record("anything", 1)) == 0


def test_a_lane_hands_out_batches_in_order_and_keeps_the_failed_tail_for_the_retry() -> None:
    lane, stop = _Lane(), threading.Event()
    for seq in range(1, 6):
        lane.put(record("a", seq))
    batch = lane.take(3, 0.0, stop)
    assert [r["dynamodb"]["SequenceNumber"] for r in batch] == ["1", "2", "3"]
    lane.done(1)  # record 2 failed: 2 and 3 are offered again, first
    again = lane.take(10, 0.0, stop)
    assert [r["dynamodb"]["SequenceNumber"] for r in again] == ["2", "3", "4", "5"]
    lane.done(len(again))
    stop.set()
    assert lane.take(10, 0.0, stop) == []


def test_duplicate_delivery_matches_function_name_substrings_or_everything() -> None:
    switch = DuplicateDelivery(("-orders-",))
    assert switch.applies("relay-dev-orders-InventoryWorkerFunction1EB84472")
    assert not switch.applies("relay-dev-payments-PaymentWorkerFunction4E210E59")
    switch.set(("*",))
    assert switch.applies("relay-dev-payments-PaymentWorkerFunction4E210E59")
    switch.set(())
    assert not switch.applies("relay-dev-orders-InventoryWorkerFunction1EB84472")


def test_batch_responses_are_read_as_lambda_reads_them() -> None:
    ids = ["m1", "m2", "m3"]
    ok = InvokeResult(True, payload={"batchItemFailures": [{"itemIdentifier": "m2"}]})
    assert failed_item_ids(ok, ids, partial=True) == {"m2"}
    assert failed_item_ids(InvokeResult(True, payload={}), ids, partial=True) == set()
    unknown = InvokeResult(True, payload={"batchItemFailures": [{"itemIdentifier": "zz"}]})
    assert failed_item_ids(unknown, ids, partial=True) == set(ids)  # malformed: the whole batch
    assert failed_item_ids(InvokeResult(False, error_type="Boom"), ids, partial=True) == set(ids)
    assert failed_item_ids(ok, ids, partial=False) == set()  # without ReportBatchItemFailures


def test_duplicate_delivery_at_a_rate_is_seeded_and_still_honours_the_named_functions() -> None:
    def picks(seed: int) -> list[bool]:
        switch = DuplicateDelivery(rate=0.3, seed=seed)
        return [switch.applies("relay-dev-payments-PaymentWorker") for _ in range(100)]

    assert picks(1) == picks(1) != picks(2)
    assert 10 < sum(picks(1)) < 50
    switch = DuplicateDelivery(("-orders-",))
    switch.set_rate(0.0)
    assert switch.applies("relay-dev-orders-Notifier") and not switch.applies("relay-dev-payments-Api")
    switch.set_rate(1.0, seed=4)
    assert switch.applies("relay-dev-payments-Api")
    with pytest.raises(ValueError, match="probability"):
        switch.set_rate(-0.1)
