"""The sandbox's event-source-mapping glue, without an emulator: stream lanes, the duplicate-delivery
switch and Lambda's reading of a batch response."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from emulator.mappings import DuplicateDelivery, StreamMapping, _Lane, failed_item_ids
from emulator.runtime import InvokeResult


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


class _Shard:
    """A one-shard stream that hands out its records once, then reads empty."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.records = records

    def get_shard_iterator(self, **_: Any) -> dict[str, str]:
        return {"ShardIterator": "it"}

    def get_records(self, **_: Any) -> dict[str, Any]:
        records, self.records = self.records, []
        return {"Records": records, "NextShardIterator": "it"}


class _FailsOnce:
    """The function: its first invocation fails, the next ones succeed; ``calls`` counts them."""

    def __init__(self) -> None:
        self.calls = 0

    def invoke(self, runtime: Any, function: str, batch: list[dict[str, Any]], stats: Any) -> InvokeResult:
        self.calls += 1
        return InvokeResult(ok=self.calls > 1, error_type="" if self.calls > 1 else "Boom")


class _HeldBackoff(threading.Event):
    """The mapping's stop event, whose retry backoff (a wait of 0.5 s or more) lasts until released."""

    def __init__(self) -> None:
        super().__init__()
        self.in_backoff = threading.Event()
        self.release = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is not None and timeout >= 0.5:
            self.in_backoff.set()
            self.release.wait(5)
            return self.is_set()
        return super().wait(timeout)


def test_a_stream_batch_waiting_out_its_retry_backoff_is_still_pending_with_nothing_in_flight() -> None:
    from emulator.mappings import MappingStats
    from emulator.provision import MappingSpec

    mapping = lane_router(1)
    mapping.spec = MappingSpec(
        function="relay-test-outbox",
        source_arn="arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/x",
        kind="dynamodb",
        batch_size=10,
        batching_window=0.0,
        report_batch_item_failures=True,
        max_concurrency=None,
        starting_position="TRIM_HORIZON",
        max_retry_attempts=3,
        on_failure_arn=None,
        bisect_on_error=False,
        enabled=True,
    )
    mapping.streams = _Shard([record("a", 1), record("b", 2)])  # type: ignore[assignment]
    function = _FailsOnce()
    stop = _HeldBackoff()
    mapping.duplicates = function  # type: ignore[assignment]
    mapping.runtime = None  # type: ignore[assignment]
    mapping.stop, mapping.log, mapping.stats, mapping.retries = stop, print, MappingStats(), 0
    lanes = [_Lane()]
    mapping._lanes, mapping._unread, mapping.threads = list(lanes), {"shard-1": True}, []
    assert mapping.pending() == 1  # nothing read yet: the stream may hold records
    reader = threading.Thread(target=mapping._read, args=("shard-1", lanes), daemon=True)
    worker = threading.Thread(target=mapping._work, args=("shard-1", lanes[0]), daemon=True)
    reader.start()
    worker.start()
    try:
        assert stop.in_backoff.wait(5), "the failed batch never backed off"
        assert function.calls == 1 and mapping.stats.in_flight == 0
        assert mapping.pending() >= 2, "the two records of the failed batch are not done"
        stop.release.set()
        for _ in range(500):
            if mapping.pending() == 0:
                break
            threading.Event().wait(0.01)
        assert function.calls == 2 and mapping.pending() == 0
    finally:
        stop.set()
        stop.release.set()
        reader.join(2)
        worker.join(2)
