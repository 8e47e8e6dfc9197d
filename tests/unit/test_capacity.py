"""The capacity model (bench/capacity.py, `make capacity`): its arithmetic against a case computed by
hand, so a wrong multiplication, a lost index write or a shard count ignored cannot pass silently.

The case: one synthetic payments flow (the shape `make cost` writes to .sandbox/cost.json), every
invocation 100 ms, 4 deadline shards, Relay's dev settings (HTTP API stage throttle 100 rps, SQS
consumers capped at 5 concurrent batches of 10, a 1 s batching window). Per operation it makes:

    payments-Api            2 invocations; PutItem 1 request = 2 WU (1 table + 1 `due` entry in);
                            GetItem 1 RU
    payments-PaymentWorker  0.1 invocations (batches of 10); UpdateItem 2 requests = 2 WU; GetItem 1 RU
    payments-OutboxPublisher 0.25 invocations; UpdateItem 1 = 2 WU (1 table + 1 `due` entry out);
                            PublishBatch 0.5 requests carrying 4 events (the meter's entries)

and every one of those DynamoDB calls on payments-operations (the IAM report's calls per table), which
has the deadline index.
    SQS (the worker's mapping) ReceiveMessage 0.2 (0.05 of them empty), DeleteMessageBatch 0.1

So, per operation: table 1 + 2 + 1 = 4 WU, 1 + 1 = 2 RU; index 2 WU; 2.35 invocations.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.capacity import (
    Capacity,
    Route,
    Row,
    Settings,
    concurrency,
    function_of,
    load_quotas,
    main,
    model,
    request_value,
    routes,
    shard_load,
    unknown,
)

API = "relay-test-payments-ApiFunctionAAAAAAAA"
WORKER = "relay-test-payments-PaymentWorkerFunctionBBBBBBBB"
PUBLISHER = "relay-test-payments-OutboxPublisherFunctionCCCCCCCC"
OPERATIONS = "relay-test-payments-operations"
INDEXES = {OPERATIONS: ["by-deadline", "due"], "relay-test-orders-orders": []}


def metered(
    caller: str, service: str, action: str, requests: float, billed: float, empty: float = 0.0
) -> dict[str, Any]:
    return {
        "caller": caller,
        "service": service,
        "action": action,
        "requests": requests,
        "billed": billed,
        "empty": empty,
    }


def called(function: str, action: str, table: str, calls: float) -> dict[str, Any]:
    return {"function": function, "action": action, "table": table, "calls": calls}


def payments_flow(*extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "invocations_per_operation": {
            "payments-ApiFunctionAAAAAAAA": 2.0,
            "payments-PaymentWorkerFunctionBBBBBBBB": 0.1,
            "payments-OutboxPublisherFunctionCCCCCCCC": 0.25,
        },
        "by_caller_per_operation": [
            metered(API, "dynamodb", "PutItem", 1, 2),
            metered(API, "dynamodb", "GetItem", 1, 1),
            metered(WORKER, "dynamodb", "UpdateItem", 2, 2),
            metered(WORKER, "dynamodb", "GetItem", 1, 1),
            metered(PUBLISHER, "dynamodb", "UpdateItem", 1, 2),
            {**metered(PUBLISHER, "sns", "PublishBatch", 0.5, 0.5), "entries": 4},
            metered(f"glue:esm ({WORKER})", "sqs", "ReceiveMessage", 0.2, 0.2, empty=0.05),
            metered(f"glue:esm ({WORKER})", "sqs", "DeleteMessageBatch", 0.1, 0.1),
            metered(f"glue:esm ({PUBLISHER})", "dynamodbstreams", "GetRecords", 0.3, 0.3, empty=0.1),
            metered("glue:sns (relay-test-payments-payment-events)", "sns", "Deliver to SQS", 4, 4),
            *extra,
        ],
        "table_calls_per_operation": [
            called(API, "PutItem", OPERATIONS, 1),
            called(API, "GetItem", OPERATIONS, 1),
            called(WORKER, "UpdateItem", OPERATIONS, 2),
            called(WORKER, "GetItem", OPERATIONS, 1),
            called(PUBLISHER, "UpdateItem", OPERATIONS, 1),
            called(PUBLISHER, "GetRecords", OPERATIONS, 0.3),
        ],
    }


def dev_settings(shards: int = 4) -> Settings:
    return Settings(
        stage="test",
        deadline_shards=shards,
        api_throttle_rate=100,
        api_throttle_burst=200,
        max_concurrency=5,
        batch_size=10,
        batching_window_seconds=1,
        api_destination_rate=1,
    )


def run(rate: float, *, shards: int = 4, flow: dict[str, Any] | None = None) -> Capacity:
    return model(
        flow or payments_flow(),
        flow="payments",
        rate=rate,
        duration_ms=100,
        settings=dev_settings(shards),
        quotas=load_quotas(),
        indexes=INDEXES,
    )


def row(cap: Capacity, resource: str, metric: str) -> Row:
    found = [r for r in cap.rows if r.resource == resource and r.metric == metric]
    assert len(found) == 1, f"{resource} / {metric}: {[(r.resource, r.metric) for r in cap.rows]}"
    return found[0]


def test_the_hand_computed_case_uses_the_documented_quotas() -> None:
    quotas = load_quotas()
    # The figures below are computed against these; a changed quota must change them on purpose.
    assert quotas["dynamodb.partition.write"].value == 1000
    assert quotas["dynamodb.table.write"].value == 40000
    assert quotas["lambda.concurrent_executions"].value == 1000
    assert quotas["sns.publish.messages"].value == 30000
    assert quotas["apigateway.account.throttle"].value == 10000
    assert not quotas["dynamodb.partition.write"].adjustable
    assert quotas["lambda.concurrent_executions"].adjustable


def test_table_units_leave_the_index_writes_to_the_index() -> None:
    cap = run(1000)
    # (2 - 1) + 2 + (2 - 1) = 4 WU per operation x 1,000/s = 4,000 WU/s, 10 % of 40,000.
    table = row(cap, "payments-operations", "write units/s (table)")
    assert table.load(1000) == pytest.approx(4000)
    assert table.utilisation(1000) == pytest.approx(0.10)
    assert table.binds_at() == pytest.approx(10_000)
    # 1 + 1 RU per operation: 2,000 RU/s, 5 %.
    assert row(cap, "payments-operations", "read units/s (table)").utilisation(1000) == pytest.approx(0.05)
    # The index as a whole: 2 WU per operation, 2,000 WU/s against its own 40,000.
    assert row(cap, "payments-operations index due", "write units/s (GSI)").load(1000) == pytest.approx(2000)


def test_a_deadline_shard_takes_the_index_writes_divided_by_the_shard_count() -> None:
    assert shard_load(1000, 2, 4) == pytest.approx(500)
    cap = run(1000)
    shard = row(cap, "payments-operations index due, one shard of 4", "write units/s (partition)")
    # 1,000/s x 2 index writes / 4 shards = 500 WU/s: 50 % of one partition's 1,000.
    assert shard.load(1000) == pytest.approx(500)
    assert shard.utilisation(1000) == pytest.approx(0.5)
    assert shard.binds_at() == pytest.approx(2000)
    # Eight shards halve it: binds at 4,000/s.
    eight = run(1000, shards=8)
    assert row(
        eight, "payments-operations index due, one shard of 8", "write units/s (partition)"
    ).binds_at() == (pytest.approx(4000))


def test_an_operation_s_own_item_carries_the_same_load_at_any_rate() -> None:
    # Each operation writes its own item: 4 WU in its whole life, at worst all in one second.
    slow, fast = run(10), run(10_000)
    for cap in (slow, fast):
        item = row(
            cap, "payments-operations OPERATION#<operationId>", "write units/s (one item, worst second)"
        )
        assert item.load(cap.rate) == pytest.approx(4)
        assert item.utilisation(cap.rate) == pytest.approx(0.004)
        assert item.binds_at() == float("inf")


def test_little_s_law_gives_lambda_concurrency() -> None:
    assert concurrency(200, 2.5, 0.06) == pytest.approx(30)
    cap = run(1000)
    # 1,000/s x (2 + 0.1 + 0.25) invocations x 0.1 s = 235 concurrent executions: 23.5 % of 1,000.
    account = row(cap, "account (every function)", "concurrent executions")
    assert account.load(1000) == pytest.approx(235)
    assert account.utilisation(1000) == pytest.approx(0.235)
    assert account.binds_at() == pytest.approx(1000 / 0.235)
    # The worker alone: 1,000 x 0.1 x 0.1 = 10, twice its event source's maximum concurrency of 5.
    worker = row(cap, "payments-PaymentWorker", "concurrent executions")
    assert worker.load(1000) == pytest.approx(10)
    assert worker.limit is not None and worker.limit.relay
    assert worker.utilisation(1000) == pytest.approx(2.0)
    assert worker.binds_at() == pytest.approx(500)
    # A stream consumer has no SQS maximum concurrency.
    assert row(cap, "payments-OutboxPublisher", "concurrent executions").limit is None


def test_messages_requests_and_in_flight_messages() -> None:
    cap = run(1000)
    # 4 events per payment (not the 0.5 PublishBatch requests): 4,000 messages/s, 13.3 % of 30,000.
    sns = row(cap, "account (every topic)", "messages published/s")
    assert sns.load(1000) == pytest.approx(4000)
    assert sns.binds_at() == pytest.approx(7500)
    # (0.2 - 0.05 idle) + 0.1 requests per operation on the worker's queue.
    assert row(cap, "queue of payments-PaymentWorker", "requests/s").load(1000) == pytest.approx(250)
    # 0.1 invocations x 10 messages x (1 s window + 0.1 s run) = 1.1 per operation: 1,100 in flight.
    in_flight = row(cap, "queue of payments-PaymentWorker", "in-flight messages (at most)")
    assert in_flight.load(1000) == pytest.approx(1100)
    # Two requests per payment: 2,000 rps, 20 times the API stage's 100, a fifth of the account's 10,000.
    assert row(cap, "payments HTTP API", "requests/s").binds_at() == pytest.approx(50)
    assert row(cap, "account (every API)", "requests/s").utilisation(1000) == pytest.approx(0.2)


def test_sns_deliveries_to_a_firehose_stream_count_against_its_direct_put_quotas() -> None:
    topic = "glue:sns (relay-test-orders-order-events)"
    cap = run(
        1000,
        flow=payments_flow(
            metered(topic, "sns", "Deliver to Firehose", 2, 2),
            metered(topic, "firehose", "Ingest (5 KB units)", 2, 2),
            metered(topic, "firehose", "Record bytes", 2, 1300),
        ),
    )
    # One request per message delivered: 2 an operation reach the stream's 2,000 requests/s at 1,000/s.
    requests = row(cap, "stream of orders-order-events", "PutRecord(Batch) requests/s")
    assert requests.binds_at() == pytest.approx(1000)
    assert requests.limit is not None and requests.limit.name == "firehose.direct_put.requests"
    # The records' own bytes, not the 5 KB units they are priced by: 1,300 B an operation is 5 MiB/s
    # at about 4,033 operations/s.
    mib = row(cap, "stream of orders-order-events", "MiB/s")
    assert mib.binds_at() == pytest.approx(5 * 1024**2 / 1300)


def test_the_first_limit_to_bind_and_its_rate() -> None:
    cap = run(1000)
    aws = cap.first_to_bind(relay=False)
    assert aws is not None
    # The shard (2,000/s) before the account's Lambda concurrency (4,255/s), the API (5,000/s) and SNS.
    assert aws.resource == "payments-operations index due, one shard of 4"
    assert aws.binds_at() == pytest.approx(2000)
    relay = cap.first_to_bind(relay=True)
    assert relay is not None and relay.resource == "payments HTTP API"
    assert relay.binds_at() == pytest.approx(50)
    # With 16 shards the shard binds at 8,000/s: the account's concurrency is first, at 1,000 / 0.235.
    spread = run(1000, shards=16).first_to_bind(relay=False)
    assert spread is not None and spread.resource == "account (every function)"
    assert spread.binds_at() == pytest.approx(4255.3, abs=0.1)


def test_per_partition_quotas_above_half_name_the_shard_and_the_shards_it_needs() -> None:
    # At 1,000/s the shard is at exactly 50 % (not above), the stream's 1 reader of 2 too.
    assert run(1000).per_partition_above() == []
    cap = run(1200)
    hot = cap.per_partition_above()
    assert [r.resource for r in hot] == ["payments-operations index due, one shard of 4"]
    assert hot[0].utilisation(1200) == pytest.approx(0.6)
    # 1,200 x 2 / (0.5 x 1,000) = 4.8: five shards keep each at 50 % or under.
    assert cap.shards_needed(hot[0]) == 5


def test_quotas_to_raise_and_the_value_to_request() -> None:
    cap = run(6000)
    raises = {r.limit.name: value for r, value in cap.to_raise() if r.limit is not None}
    # Lambda: 6,000 x 0.235 = 1,410 (141 %): request 1,410 / 0.8 = 1,762.5 -> 1,800.
    # API: 12,000 rps (120 %): 15,000. SNS: 24,000 messages/s is 80 %, not above: not listed.
    assert raises == {"lambda.concurrent_executions": 1800, "apigateway.account.throttle": 15000}
    assert request_value(70_000) == 88_000
    assert request_value(40_000) == 50_000


def test_a_transaction_s_units_are_shared_over_the_tables_of_its_items() -> None:
    inventory = "relay-test-orders-InventoryWorkerFunctionDDDDDDDD"
    flow = {
        "by_caller_per_operation": [
            metered(inventory, "dynamodb", "GetItem", 1, 1),
            metered(inventory, "dynamodb", "TransactWriteItems", 1, 4),
        ],
        "table_calls_per_operation": [
            called(inventory, "GetItem", "relay-test-orders-orders", 1),
            called(inventory, "UpdateItem", "relay-test-orders-inventory", 1),
            called(inventory, "UpdateItem", "relay-test-orders-orders", 1),
        ],
    }
    found, unplaced = routes(flow, INDEXES)
    assert unplaced == []
    assert sorted(found, key=lambda r: (r.action, r.table)) == [
        Route("orders-InventoryWorker", "GetItem", "orders-orders", 1, 1),
        Route("orders-InventoryWorker", "TransactWriteItems", "orders-inventory", 1, 2),
        Route("orders-InventoryWorker", "TransactWriteItems", "orders-orders", 1, 2),
    ]
    cap = model(flow, flow="orders", rate=100, duration_ms=100, settings=dev_settings(), quotas=load_quotas())
    # The SKU's stock is one key every order writes: 2 WU an order, 200 WU/s at 100 orders/s.
    stock = row(cap, "orders-inventory SKU#<sku> (stock)", "write units/s (shared key)")
    assert stock.load(100) == pytest.approx(200)


def test_a_put_beside_a_transaction_goes_to_the_only_tables_whose_calls_it_explains() -> None:
    worker = "relay-test-scores-SnapshotWorkerFunctionEEEEEEEE"
    flow = {
        "by_caller_per_operation": [
            metered(worker, "dynamodb", "PutItem", 2.5, 2.5),
            metered(worker, "dynamodb", "TransactWriteItems", 1, 2),
        ],
        "table_calls_per_operation": [
            called(worker, "PutItem", "relay-test-scores-scores", 2.5),
            called(worker, "PutItem", "relay-test-scores-idempotency", 1),
        ],
    }
    found, unplaced = routes(flow)
    assert unplaced == []
    assert {(r.action, r.table, r.entries, r.units) for r in found} == {
        ("PutItem", "scores-scores", 2.5, 2.5),
        ("TransactWriteItems", "scores-idempotency", 1, 2),
    }


def test_with_the_calls_api_operation_a_put_and_a_transactions_put_that_tie_are_told_apart() -> None:
    # Without the operation, 1 PutItem and a 1-item TransactWriteItems on two tables, one call each,
    # fit either way round (the snapshot flow's case); the IAM report's operation settles it.
    worker = "relay-test-scores-SnapshotWorkerFunctionEEEEEEEE"
    flow = {
        "by_caller_per_operation": [
            metered(worker, "dynamodb", "PutItem", 1, 1),
            metered(worker, "dynamodb", "TransactWriteItems", 1, 2),
        ],
        "table_calls_per_operation": [
            {**called(worker, "PutItem", "relay-test-scores-scores", 1), "operation": "TransactWriteItems"},
            {**called(worker, "PutItem", "relay-test-scores-idempotency", 1), "operation": "PutItem"},
        ],
    }
    found, unplaced = routes(flow)
    assert unplaced == []
    assert {(r.action, r.table, r.entries, r.units) for r in found} == {
        ("PutItem", "scores-idempotency", 1, 1),
        ("TransactWriteItems", "scores-scores", 1, 2),
    }
    untold = {
        **flow,
        "table_calls_per_operation": [
            called(**{k: c[k] for k in ("function", "action", "table", "calls")})
            for c in flow["table_calls_per_operation"]
        ],
    }
    assert routes(untold)[1]  # ambiguous without it: named, not guessed


def test_a_route_on_a_table_the_model_does_not_know_is_named() -> None:
    mystery = "relay-test-payments-MysteryFunctionDDDDDDDD"
    flow = payments_flow(metered(mystery, "dynamodb", "PutItem", 1, 3))
    flow["table_calls_per_operation"].append(called(mystery, "PutItem", "relay-test-payments-ledger", 1))
    assert unknown(flow, INDEXES) == [
        "dynamodb PutItem by payments-Mystery on payments-ledger: the table's key is not in KEYS"
    ]
    cap = run(1000, flow=flow)
    assert row(cap, "payments-ledger", "write units/s (table)").load(1000) == pytest.approx(3000)
    assert any("payments-Mystery" in entry for entry in cap.unmapped)
    # The known table is unchanged by it.
    assert row(cap, "payments-operations", "write units/s (table)").load(1000) == pytest.approx(4000)


def test_requests_and_calls_that_do_not_match_are_named() -> None:
    flow = payments_flow(metered(WORKER, "dynamodb", "DeleteItem", 1, 1))
    flow["table_calls_per_operation"].append(called(PUBLISHER, "PutItem", OPERATIONS, 1))
    assert unknown(flow, INDEXES) == [
        "dynamodb PutItem by payments-OutboxPublisher on payments-operations: 1 calls no metered request "
        "explains",
        "dynamodb DeleteItem by payments-PaymentWorker: 1 units on no table the calls tell",
    ]
    assert unknown(payments_flow(), INDEXES) == []


def test_without_the_meter_s_entries_a_publish_batch_counts_as_ten_messages() -> None:
    flow = payments_flow()
    flow["by_caller_per_operation"] = [
        metered(PUBLISHER, "sns", "PublishBatch", 0.5, 0.5) if r["action"] == "PublishBatch" else r
        for r in flow["by_caller_per_operation"]
    ]
    sns = row(run(1000, flow=flow), "account (every topic)", "messages published/s")
    assert sns.load(1000) == pytest.approx(5000)
    assert "upper bound" in sns.note


def test_function_names_lose_the_stage_and_the_construct_hash() -> None:
    assert function_of("relay-dev-payments-ApiFunction6BF808ED") == "payments-Api"
    assert function_of("glue:esm (relay-prod-orders-PaidOrdersFunctionB7B28973)") == "orders-PaidOrders"
    assert function_of("payments-OutboxPublisherFunction4BDC6D54") == "payments-OutboxPublisher"
    assert (
        function_of("schedule relay-dev-scores-hourly-snapshot")
        == "schedule relay-dev-scores-hourly-snapshot"
    )


def test_without_make_cost_s_figures_it_says_what_to_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--rate", "100", "--json", str(tmp_path / "missing.json")]) == 2
    assert "run `make cost` first" in capsys.readouterr().err


def test_the_command_writes_the_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cost = tmp_path / "cost.json"
    cost.write_text(
        json.dumps({"duration_ms_assumed": 100, "flows": {"payments": payments_flow()}, "indexes": INDEXES})
    )
    assert main(["--rate", "100", "--json", str(cost), "--flow", "orders"]) == 2
    assert "flow 'orders' is not in" in capsys.readouterr().err
    out = tmp_path / "capacity.json"
    assert main(["--rate", "1000", "--json", str(cost), "--shards", "4", "--json-out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "first AWS quota to bind: DynamoDB: payments-operations index due, one shard of 4" in printed
    written = json.loads(out.read_text())
    assert written["first_to_bind"]["aws"]["rate"] == pytest.approx(2000)
    assert written["settings"]["deadline_shards"] == 4
