"""TransactWriteItems in the emulator: ``emulator.moto_patches`` patch 2 beside moto's own implementation;
and the parse and validation of a payment step's update expression, patch 13 (no deep copy of the
AST) beside moto's own.
Prints ``<name>: <value>`` lines. Figures only -- nothing here is asserted.

Run from the repo root: ``.venv/bin/python bench/moto_transactions_bench.py``.

In-process moto (``mock_aws``), one table with a NEW_AND_OLD_IMAGES stream holding 5,000 items. Each
transaction has 3 writes: a conditional Put of a new row, an Update of an existing row (a counter
and a list_append), and the Delete of the previous transaction's row, so the table stays at 5,000
items while the stream history grows. moto's own implementation deep-copies the table (items and
stream history) per transaction, so it runs a few transactions only: its figure grows with the
history. ``*_backend`` calls the DynamoDB backend directly (the transaction alone); ``*_client``
goes through boto3 and moto's request handling, as a handler test does.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from bench_size import scaled  # bench/, the script's own directory
from in_process_moto import prepare

prepare()

TABLE = "bench-table"
ITEMS = scaled(5_000, 200)
TRANSACTIONS = scaled(2_000, 20)
MOTO_OWN_TRANSACTIONS = scaled(20, 2)


def _transaction(i: int) -> list[dict[str, Any]]:
    return [
        {
            "Put": {
                "TableName": TABLE,
                "Item": {"pk": {"S": f"tx#{i}"}, "kind": {"S": "outbox"}, "n": {"N": str(i)}},
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        },
        {
            "Update": {
                "TableName": TABLE,
                "Key": {"pk": {"S": f"item#{i % ITEMS}"}},
                "UpdateExpression": "SET n = n + :one, steps = list_append(steps, :step)",
                "ExpressionAttributeValues": {":one": {"N": "1"}, ":step": {"L": [{"S": f"step-{i}"}]}},
            }
        },
        {"Delete": {"TableName": TABLE, "Key": {"pk": {"S": f"tx#{i - 1}"}}}},
    ]


def _per_transaction_us(count: int, patched: bool, via_client: bool) -> float:
    import boto3
    from moto import mock_aws
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    from emulator.moto_patches import fast_atomic_dynamodb

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        backend = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
        for i in range(ITEMS):
            backend.put_item(
                TABLE,
                {"pk": {"S": f"item#{i}"}, "n": {"N": "0"}, "steps": {"L": []}, "note": {"S": "x" * 200}},
            )
        transact: Callable[[list[dict[str, Any]]], Any] = (
            (lambda items: client.transact_write_items(TransactItems=items))  # type: ignore[arg-type]
            if via_client
            else (lambda items: backend.transact_write_items(items))  # looked up after patching
        )
        transactions = [_transaction(i) for i in range(count)]
        if patched:
            with fast_atomic_dynamodb():
                started = time.process_time()
                for items in transactions:
                    transact(items)
                elapsed = time.process_time() - started
        else:
            started = time.process_time()
            for items in transactions:
                transact(items)
            elapsed = time.process_time() - started
        assert len(backend.get_table(TABLE).items) == ITEMS + 1  # the figures are for a correct run
    return elapsed / count * 1e6


# A payment step's transition, the shape of the updates the chaos run's emulator validates most.
STEP_UPDATE = (
    "SET #status = :to, #updatedAt = :now, #stateSince = :now, #version = #version + :one, "
    "#history = list_append(if_not_exists(#history, :empty), :entry), #deadline = :deadline, "
    "#shard = :shard, #attempts = if_not_exists(#attempts, :zero) + :one, #paymentId = :pid "
    "REMOVE #error, #lease"
)
VALIDATIONS = scaled(300, 10)


def _validation_us() -> tuple[float, float]:
    """(moto's, patch 13's) CPU µs to parse and validate STEP_UPDATE, alternating in one process."""
    from moto.dynamodb.models.dynamo_type import DynamoType, Item
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]
    from moto.dynamodb.parsing.validators import UpdateExpressionValidator

    from emulator.patches.update_asts import install as single_use_update_asts

    names = {name: name[1:] for name in re.findall(r"#\w+", STEP_UPDATE)}
    values: dict[str, dict[str, Any]] = {
        ":to": {"S": "PAYMENT_PROCESSING"},
        ":now": {"S": "2026-12-02T00:00:00Z"},
        ":one": {"N": "1"},
        ":empty": {"L": []},
        ":entry": {"L": [{"M": {"to": {"S": "PAYMENT_PROCESSING"}, "at": {"S": "2026-12-02T00:00:00Z"}}}]},
        ":deadline": {"N": "1796169600"},
        ":shard": {"S": "open#1"},
        ":zero": {"N": "0"},
        ":pid": {"S": "p-1"},
    }

    class _Table:  # what the validators read of a table
        table_key_attrs = ["pk", "sk"]
        attr: list[Any] = []
        attribute_keys = ["pk", "sk"]

    def run() -> float:
        started = time.process_time()
        for _ in range(VALIDATIONS):
            item = Item(
                DynamoType({"S": "OPERATION#1"}),
                DynamoType({"S": "OPERATION"}),
                {
                    "pk": {"S": "OPERATION#1"},
                    "sk": {"S": "OPERATION"},
                    "version": {"N": "3"},
                    "history": {"L": []},
                },
            )
            UpdateExpressionValidator(
                UpdateExpressionParser.make(STEP_UPDATE),
                expression_attribute_names=names,
                expression_attribute_values=values,
                item=item,
                table=_Table(),  # type: ignore[arg-type]  # the attributes the validators read
            ).validate()
        return (time.process_time() - started) / VALIDATIONS * 1e6

    own, patched = [], []
    for _ in range(3):  # alternating, so a slow moment of the machine falls on both
        own.append(run())
        remove = single_use_update_asts()
        try:
            patched.append(run())
        finally:
            remove()
    return min(own), min(patched)


# name: (transactions, patch 2, through the client)
RUNS: dict[str, tuple[int, bool, bool]] = {
    "moto_own_backend": (MOTO_OWN_TRANSACTIONS, False, False),
    "patched_backend": (TRANSACTIONS, True, False),
    "moto_own_client": (MOTO_OWN_TRANSACTIONS, False, True),
    "patched_client": (TRANSACTIONS, True, True),
}


def main() -> None:
    if len(sys.argv) == 2:  # one figure, in a process of its own
        print(_per_transaction_us(*RUNS[sys.argv[1]]))
        return
    # Each figure in a fresh process: moto keeps the objects of a run (the deep copies too), and a
    # larger heap slows whatever runs after it in the same process.
    us = {
        name: float(
            subprocess.run(
                [sys.executable, __file__, name], check=True, capture_output=True, text=True
            ).stdout
        )
        for name in RUNS
    }
    for name, (count, _, _) in RUNS.items():
        print(f"{name}_us_per_transaction: {us[name]:.0f}  ({count} transactions)")
    for via in ("backend", "client"):
        print(f"moto_own_over_patched_{via}: {us[f'moto_own_{via}'] / us[f'patched_{via}']:.0f}")
    moto_own, patched = _validation_us()
    print(f"moto_own_us_per_step_update_validation: {moto_own:.0f}")
    print(f"patched_us_per_step_update_validation: {patched:.0f}")
    print(f"moto_own_over_patched_step_update_validation: {moto_own / patched:.2f}")


if __name__ == "__main__":
    main()
