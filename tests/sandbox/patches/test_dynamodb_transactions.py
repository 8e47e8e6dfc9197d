"""Patch 2 (``emulator.patches.dynamodb_transactions``): TransactWriteItems all-or-nothing without
snapshots of its tables, against moto's own implementation run on the same requests."""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import boto3
import pytest
from moto import mock_aws

from emulator.patches import dynamodb_transactions
from tests.sandbox.patches.support import (
    ONE,
    assert_agrees_with_moto_but_cancels_a_write_invalid_for_the_stored_item,
    earlier_writes,
    installed,
    items,
    outcome,
    seed,
    table_with_stream,
    transactions_run_by,
    update,
)


def _patch_2() -> contextlib.AbstractContextManager[None]:
    return installed(dynamodb_transactions.install)


INVALID_FOR_THE_STORED_ITEM = {
    "arithmetic on a string": (
        update("label", "SET n = n + :one", ONE),
        "Invalid UpdateExpression: Incorrect operand type for operator or function; operator or function: +, "
        "operand type: S",
    ),
    "ADD to a string": (
        update("label", "ADD n :one", ONE),
        "An operand in the update expression has an incorrect data type",
    ),
    "ADD a number to a string set": (
        update("label", "ADD tags :one", ONE),
        "An operand in the update expression has an incorrect data type",
    ),
    "list_append on a string": (
        update("label", "SET n = list_append(n, :l)", {":l": {"L": [{"S": "z"}]}}),
        "Invalid UpdateExpression: Incorrect operand type for operator or function; operator or function: "
        "list_append, operand type: S",
    ),
    "an attribute the expression reads is missing": (
        update("label", "SET visits = visits + :one", ONE),
        "The provided expression refers to an attribute that does not exist in the item",
    ),
    "the updated item over 400 KB": (
        update("large", "SET more = :more", {":more": {"S": "z" * 200_000}}),
        "Item size to update has exceeded the maximum allowed size",
    ),
}


@pytest.mark.parametrize("failing", list(INVALID_FOR_THE_STORED_ITEM), ids=list(INVALID_FOR_THE_STORED_ITEM))
def test_a_write_failing_after_the_conditions_passed_cancels_the_whole_transaction(failing: str) -> None:
    """DynamoDB's answer: TransactionCanceledException, the failing action's reason ValidationError with
    the single write's message, None for the others; no item and no stream record of the earlier
    writes. moto's own implementation answers a bare ValidationException with that message, also with
    nothing applied."""
    update_action, message = INVALID_FOR_THE_STORED_ITEM[failing]
    with mock_aws():  # moto's own
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        records = table_with_stream(ddb)
        seed(ddb)
        items_before, records_before = items(ddb), records()
        motos = outcome(ddb, [*earlier_writes(), update_action])
        assert (items(ddb), records()) == (items_before, records_before)
    assert (motos["code"], motos["message"], motos["reasons"]) == ("ValidationException", message, None)

    with _patch_2(), mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        records = table_with_stream(ddb)
        seed(ddb)
        items_before, records_before = items(ddb), records()

        cancelled = outcome(ddb, [*earlier_writes(), update_action])

        assert items(ddb) == items_before
        assert records() == records_before
        assert cancelled == {
            "code": "TransactionCanceledException",
            "message": "Transaction cancelled, please refer cancellation reasons for specific reasons "
            "[None, None, None, None, ValidationError]",
            "reasons": [{"Code": "None"}] * 4 + [{"Code": "ValidationError", "Message": message}],
        }
        # The same actions without the failing one commit, each stream record once, in request order.
        assert outcome(ddb, earlier_writes()) == {"code": None}
        added = records()[len(records_before) :]
        assert [(name, keys["pk"]["S"]) for name, _, keys, _, _ in added] == [
            ("INSERT", "new"),
            ("MODIFY", "counter"),
            ("REMOVE", "doomed"),
        ]
        assert added[1][4] == {
            "pk": {"S": "counter"},
            "n": {"N": "2"},
            "steps": {"L": [{"S": "a"}, {"S": "b"}]},
        }


def test_the_patch_and_motos_own_implementation_agree_on_each_transactions_outcome() -> None:
    assert_agrees_with_moto_but_cancels_a_write_invalid_for_the_stored_item(
        patched=transactions_run_by(_patch_2), motos=transactions_run_by(contextlib.nullcontext)
    )


def _stream_of_an_update_creating_its_item() -> list[tuple[Any, ...]]:
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        records = table_with_stream(ddb)
        ddb.transact_write_items(TransactItems=[update("fresh", "SET n = :one", ONE)])
        return [(name, old, new) for name, _, _, old, new in records()]


def test_an_update_that_creates_its_item_emits_one_insert_with_the_new_image() -> None:
    """As DynamoDB does; moto's own emits two INSERTs, the first with the key alone."""
    assert _stream_of_an_update_creating_its_item() == [
        ("INSERT", None, {"pk": {"S": "fresh"}}),
        ("INSERT", None, {"pk": {"S": "fresh"}, "n": {"N": "1"}}),
    ]
    with _patch_2():
        assert _stream_of_an_update_creating_its_item() == [
            ("INSERT", None, {"pk": {"S": "fresh"}, "n": {"N": "1"}})
        ]


def test_a_transaction_copies_no_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto deep-copies the table, items and stream history, for each action that names it before
    applying the transaction (the cost that grows with the table); the patch copies only the items
    it updates."""
    from moto.dynamodb.models.table import Table

    copied: list[str] = []
    deepcopy = copy.deepcopy

    def counting(value: Any, *args: Any) -> Any:
        if isinstance(value, Table):
            copied.append(value.name)
        return deepcopy(value, *args)

    monkeypatch.setattr(copy, "deepcopy", counting)

    def tables_copied_by_one_transaction() -> list[str]:
        with mock_aws():
            ddb = boto3.client("dynamodb", region_name="us-east-1")
            table_with_stream(ddb)
            seed(ddb)
            del copied[:]
            assert outcome(ddb, earlier_writes()) == {"code": None}
            return list(copied)

    assert tables_copied_by_one_transaction() == ["t"] * len(earlier_writes())
    with _patch_2():
        assert tables_copied_by_one_transaction() == []
