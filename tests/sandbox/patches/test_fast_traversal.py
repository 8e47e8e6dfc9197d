"""Patch 15 (``emulator.patches.fast_traversal``): expression trees walked with each node's class looked
up once answer what moto answers -- items written, the errors and their messages -- and no longer test
every node's class through ``ABCMeta.__instancecheck__``. Run with the patches the emulator runs
before it (2, 3, 11 and 13)."""

from __future__ import annotations

import abc
from typing import Any

import boto3
from moto import mock_aws

from emulator.moto_patches import fast_atomic_dynamodb
from emulator.patches import fast_traversal, update_asts
from tests.sandbox.patches.support import table_with_stream

# Each (update expression, names, values): valid ones of every action and function, and ones moto
# refuses in its validators (the passes the patch walks): too many clauses, overlapping paths, a key
# updated, a missing attribute, a type mismatch, an empty key value, an unknown placeholder.
UPDATES: list[tuple[str, dict[str, str], dict[str, Any]]] = [
    (
        "SET #s = :to, #v = if_not_exists(#v, :zero) + :one, #h = list_append(if_not_exists(#h, :e), :x) "
        "REMOVE #gone",
        {"#s": "status", "#v": "version", "#h": "history", "#gone": "gone"},
        {
            ":to": {"S": "A"},
            ":zero": {"N": "0"},
            ":one": {"N": "1"},
            ":e": {"L": []},
            ":x": {"L": [{"S": "a"}]},
        },
    ),
    (
        "SET m = :m, n = :n ADD c :two, tags :set",
        {},
        {":m": {"M": {"k": {"S": "v"}}}, ":n": {"N": "5"}, ":two": {"N": "2"}, ":set": {"SS": ["p"]}},
    ),
    (
        "SET m.k = :v, n = n - :one DELETE tags :set",
        {},
        {":v": {"S": "w"}, ":one": {"N": "1"}, ":set": {"SS": ["p"]}},
    ),
    ("SET a = :one SET b = :one", {}, {":one": {"N": "1"}}),  # two SET clauses
    ("REMOVE a REMOVE b", {}, {}),
    ("SET a = :one, a = :two", {}, {":one": {"N": "1"}, ":two": {"N": "2"}}),  # overlapping paths
    ("SET m.k = :one, m = :two", {}, {":one": {"N": "1"}, ":two": {"N": "2"}}),
    ("SET pk = :v", {}, {":v": {"S": "other"}}),  # the key
    ("SET n = absent + :one", {}, {":one": {"N": "1"}}),
    ("SET n = m + :one", {}, {":one": {"N": "1"}}),  # a map plus a number
    ("SET n = :nope", {}, {":one": {"N": "1"}}),  # no such placeholder
    ("SET #k = :v", {"#k": "pk"}, {":v": {"S": ""}}),
]


def _workload(patched: bool) -> list[Any]:
    from botocore.exceptions import ClientError

    removes = [update_asts.install()]
    if patched:
        removes.append(fast_traversal.install())
    try:
        with fast_atomic_dynamodb(), mock_aws():
            ddb = boto3.client("dynamodb", region_name="us-east-1")
            table_with_stream(ddb)
            answers: list[Any] = []
            for expression, names, values in UPDATES * 2:
                update: dict[str, Any] = {"UpdateExpression": expression}
                if names:
                    update["ExpressionAttributeNames"] = names
                if values:
                    update["ExpressionAttributeValues"] = values
                try:
                    answer = ddb.update_item(
                        TableName="t", Key={"pk": {"S": "a"}}, ReturnValues="ALL_NEW", **update
                    )
                    answers.append(answer.get("Attributes"))
                except ClientError as exc:
                    answers.append((exc.response["Error"]["Code"], exc.response["Error"]["Message"]))
                try:
                    ddb.transact_write_items(
                        TransactItems=[{"Update": {"TableName": "t", "Key": {"pk": {"S": "t"}}, **update}}]
                    )
                    answers.append("committed")
                except ClientError as exc:
                    answers.append((exc.response["Error"]["Code"], exc.response["Error"]["Message"]))
            answers.append(sorted(map(str, ddb.scan(TableName="t")["Items"])))
            return answers
    finally:
        for remove in reversed(removes):
            remove()


def test_expression_trees_walked_by_class_answer_what_moto_answers_errors_and_messages_included() -> None:
    unpatched = _workload(patched=False)
    patched = _workload(patched=True)
    assert patched == unpatched
    # The workload reaches every validator the walk serves: applied updates and distinct refusals.
    refusals = {a[1].split(";")[0] for a in unpatched if isinstance(a, tuple)}
    assert len(refusals) >= 7, refusals
    assert sum(1 for a in unpatched if isinstance(a, dict)) >= 3


def test_a_walk_tests_each_node_class_once_not_each_node() -> None:
    checks: list[int] = []
    original = abc.ABCMeta.__instancecheck__

    def counting(cls: Any, instance: Any) -> bool:
        checks.append(1)
        return original(cls, instance)

    abc.ABCMeta.__instancecheck__ = counting  # type: ignore[method-assign]
    try:
        _workload(patched=False)
        moto_checks = len(checks)
        del checks[:]
        _workload(patched=True)
    finally:
        abc.ABCMeta.__instancecheck__ = original  # type: ignore[method-assign]
    assert len(checks) < moto_checks / 3, (len(checks), moto_checks)
