"""Patch 11 (``emulator.patches.client_request_token``): a TransactWriteItems retried with its
ClientRequestToken, against moto's own handler on the same requests."""

from __future__ import annotations

import uuid
from typing import Any

import boto3
import pytest
from moto import mock_aws

from emulator.patches import client_request_token
from tests.sandbox.patches.support import installed

ITEMS: list[Any] = [
    {
        "Put": {
            "TableName": "t",
            "Item": {"pk": {"S": "a"}},
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    },
    {
        "Update": {
            "TableName": "t",
            "Key": {"pk": {"S": "counter"}},
            "UpdateExpression": "ADD n :one",
            "ExpressionAttributeValues": {":one": {"N": "1"}},
        }
    },
]


def _table(ddb: Any) -> None:
    ddb.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


def _counter(ddb: Any) -> Any:
    return ddb.get_item(TableName="t", Key={"pk": {"S": "counter"}})["Item"]["n"]


def test_moto_fails_the_retry_of_a_committed_transaction() -> None:
    """moto ignores the token: the retry runs again and fails its own condition; without a condition
    it would apply twice."""
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        _table(ddb)
        ddb.transact_write_items(TransactItems=ITEMS, ClientRequestToken="token-1")
        with pytest.raises(ddb.exceptions.TransactionCanceledException):
            ddb.transact_write_items(TransactItems=ITEMS, ClientRequestToken="token-1")  # the retry
        ddb.transact_write_items(TransactItems=ITEMS[1:], ClientRequestToken="token-2")
        ddb.transact_write_items(TransactItems=ITEMS[1:], ClientRequestToken="token-2")  # the retry
        assert _counter(ddb) == {"N": "3"}


def test_a_transaction_retried_with_its_client_request_token_succeeds_and_applies_once() -> None:
    """botocore keeps a call's ClientRequestToken across its retries: a retry of a transaction that
    committed (its reply lost) must succeed without applying it again, as on DynamoDB."""
    first, second = (f"token-{uuid.uuid4()}" for _ in range(2))  # the patch keeps tokens 10 minutes
    with installed(client_request_token.install), mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        _table(ddb)
        ddb.transact_write_items(TransactItems=ITEMS, ClientRequestToken=first)
        ddb.transact_write_items(TransactItems=ITEMS, ClientRequestToken=first)  # the retry
        assert _counter(ddb) == {"N": "1"}
        with pytest.raises(ddb.exceptions.TransactionCanceledException):
            ddb.transact_write_items(TransactItems=ITEMS, ClientRequestToken=second)  # a new call
        with pytest.raises(ddb.exceptions.IdempotentParameterMismatchException):
            ddb.transact_write_items(TransactItems=ITEMS[1:], ClientRequestToken=first)
        assert _counter(ddb) == {"N": "1"}
