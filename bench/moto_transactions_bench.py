"""TransactWriteItems in the emulator: ``local.moto_patches`` patch 2 beside moto's own implementation,
and patch 13 (no deep copy of the update expression's AST) on top of it.
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

import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from in_process_moto import prepare  # bench/, the script's own directory

prepare()

TABLE = "bench-table"
ITEMS = 5_000
TRANSACTIONS = 2_000
MOTO_OWN_TRANSACTIONS = 20


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


def _per_transaction_us(count: int, patched: bool, via_client: bool, uncopied_asts: bool) -> float:
    import boto3
    from moto import mock_aws
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    from local.moto_patches import fast_atomic_dynamodb, single_use_update_asts

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
            remove = single_use_update_asts() if uncopied_asts else None
            try:
                with fast_atomic_dynamodb():
                    started = time.process_time()
                    for items in transactions:
                        transact(items)
                    elapsed = time.process_time() - started
            finally:
                if remove is not None:
                    remove()
        else:
            started = time.process_time()
            for items in transactions:
                transact(items)
            elapsed = time.process_time() - started
        assert len(backend.get_table(TABLE).items) == ITEMS + 1  # the figures are for a correct run
    return elapsed / count * 1e6


# name: (transactions, patch 2, through the client, patch 13)
RUNS: dict[str, tuple[int, bool, bool, bool]] = {
    "moto_own_backend": (MOTO_OWN_TRANSACTIONS, False, False, False),
    "patched_backend": (TRANSACTIONS, True, False, False),
    "moto_own_client": (MOTO_OWN_TRANSACTIONS, False, True, False),
    "patched_client": (TRANSACTIONS, True, True, False),
    # Patch 13 on top: the update expression's AST validated without moto's deep copy of it.
    "patched_uncopied_ast_client": (TRANSACTIONS, True, True, True),
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
    for name, (count, *_) in RUNS.items():
        print(f"{name}_us_per_transaction: {us[name]:.0f}  ({count} transactions)")
    for via in ("backend", "client"):
        print(f"moto_own_over_patched_{via}: {us[f'moto_own_{via}'] / us[f'patched_{via}']:.0f}")
    print(f"patched_over_uncopied_ast_client: {us['patched_client'] / us['patched_uncopied_ast_client']:.2f}")


if __name__ == "__main__":
    main()
