"""Patch 13 (``emulator.patches.update_asts``): update expressions validated without moto's deep copy of
the parsed tree answer what moto answers, and copy it no more. Run with patches 2, 3 and 11 as the
emulator runs them (transactions then validate through patch 2)."""

from __future__ import annotations

from typing import Any

import boto3
from moto import mock_aws

from emulator.moto_patches import fast_atomic_dynamodb
from emulator.patches import update_asts
from tests.sandbox.patches.support import table_with_stream


def _update_workload(patched: bool) -> list[Any]:
    """UpdateItems of every kind (creating, nested, failing on types or conditions), alone and in
    transactions; returns every answer or error code and the table's final items."""
    from botocore.exceptions import ClientError

    remove = update_asts.install() if patched else None
    try:
        with fast_atomic_dynamodb(), mock_aws():
            ddb = boto3.client("dynamodb", region_name="us-east-1")
            table_with_stream(ddb)
            updates: list[dict[str, Any]] = [
                {  # creates its item: validated twice (an empty item, then the created one)
                    "Key": {"pk": {"S": "a"}},
                    "UpdateExpression": "SET n = if_not_exists(n, :zero) + :one, tags = :tags",
                    "ExpressionAttributeValues": {
                        ":zero": {"N": "0"},
                        ":one": {"N": "1"},
                        ":tags": {"L": []},
                    },
                },
                {
                    "Key": {"pk": {"S": "a"}},
                    "UpdateExpression": (
                        "SET n = n + :one, tags = list_append(tags, :t), m.#k = :v REMOVE gone"
                    ),
                    "ExpressionAttributeNames": {"#k": "key"},
                    "ExpressionAttributeValues": {
                        ":one": {"N": "1"},
                        ":t": {"L": [{"S": "x"}]},
                        ":v": {"S": "v"},
                    },
                },
                {
                    "Key": {"pk": {"S": "a"}},
                    "UpdateExpression": "SET m = :m ADD c :two, s :set",
                    "ExpressionAttributeValues": {
                        ":m": {"M": {"key": {"S": "w"}}},
                        ":two": {"N": "2"},
                        ":set": {"SS": ["p", "q"]},
                    },
                },
                {  # a string plus a number: ValidationException
                    "Key": {"pk": {"S": "a"}},
                    "UpdateExpression": "SET m = m + :one",
                    "ExpressionAttributeValues": {":one": {"N": "1"}},
                },
                {  # a condition that fails
                    "Key": {"pk": {"S": "a"}},
                    "UpdateExpression": "SET n = :n",
                    "ConditionExpression": "n = :nope",
                    "ExpressionAttributeValues": {":n": {"N": "9"}, ":nope": {"N": "99"}},
                },
                {  # an attribute the expression needs is missing
                    "Key": {"pk": {"S": "b"}},
                    "UpdateExpression": "SET n = missing + :one",
                    "ExpressionAttributeValues": {":one": {"N": "1"}},
                },
            ]
            answers: list[Any] = []
            for update in updates * 2:  # the same expressions again: no state carried from the first
                try:
                    answer = ddb.update_item(TableName="t", ReturnValues="ALL_NEW", **update)
                    answers.append(answer.get("Attributes"))
                except ClientError as exc:
                    answers.append(exc.response["Error"]["Code"])
                try:
                    ddb.transact_write_items(
                        TransactItems=[
                            {
                                "Update": {
                                    "TableName": "t",
                                    **update,
                                    "Key": {"pk": {"S": "t-" + update["Key"]["pk"]["S"]}},
                                }
                            }
                        ]
                    )
                    answers.append("committed")
                except ClientError as exc:
                    answers.append(
                        (
                            exc.response["Error"]["Code"],
                            [r.get("Code") for r in exc.response.get("CancellationReasons", [])],
                        )
                    )
            answers.append(sorted(map(str, ddb.scan(TableName="t")["Items"])))
            return answers
    finally:
        if remove is not None:
            remove()


def test_update_expressions_validated_without_the_ast_copy_answer_what_moto_answers() -> None:
    from moto.dynamodb.parsing import validators

    copied: list[int] = []
    original = validators.deepcopy
    validators.deepcopy = lambda node: copied.append(1) or original(node)  # type: ignore[assignment]
    try:
        unpatched = _update_workload(patched=False)
        moto_copies = len(copied)
        del copied[:]
        patched = _update_workload(patched=True)
    finally:
        validators.deepcopy = original  # type: ignore[assignment]
    assert patched == unpatched
    assert "ValidationException" in unpatched and "ConditionalCheckFailedException" in unpatched
    # moto copied the AST for each of the 22 validations, and the list list_append extends (twice);
    # now only that list is copied.
    assert (moto_copies, len(copied)) == (24, 2)
