"""The kernel's client Idempotency-Key rules (relay.request_keys) on moto DynamoDB: ids derived from
(caller, key), a stored entity answering its own request's retry, and keys bound by the layout before."""

from __future__ import annotations

import uuid

import pytest

from relay.request_keys import (
    IdempotencyKeyMismatch,
    RequestKeys,
    derived_id,
    request_sha256,
    same_request,
)
from tests.handlers.moto_env import Aws

NAMESPACE = uuid.UUID("00000000-0000-4000-8000-000000000001")


def keys(aws: Aws) -> RequestKeys:
    return RequestKeys(
        table_name=aws.table,
        ddb_client=aws.ddb,
        entity="widget",
        id_attribute="widgetId",
        retry_hint="a new widget",
    )


def test_a_key_names_one_entity_per_caller() -> None:
    first = derived_id(NAMESPACE, "arn:aws:iam::1:user/alice", "k-1")

    assert first == derived_id(NAMESPACE, "arn:aws:iam::1:user/alice", "k-1")
    assert first != derived_id(NAMESPACE, "arn:aws:iam::1:user/bob", "k-1")
    assert first != derived_id(NAMESPACE, "arn:aws:iam::1:user/alice", "k-2")
    # The pair is encoded, not concatenated: ("a:b", "c") and ("a", "b:c") are two entities.
    assert derived_id(NAMESPACE, "a:b", "c") != derived_id(NAMESPACE, "a", "b:c")


def test_the_stored_entity_answers_the_same_body_and_refuses_another_naming_both_hashes() -> None:
    stored = {"widgetId": "w-1", "requestSha256": request_sha256({"a": "1", "b": "2"})}

    same_request(  # key order does not matter
        stored,
        request_sha256({"b": "2", "a": "1"}),
        idempotency_key="k",
        entity_id="w-1",
        entity="widget",
        retry_hint="a new widget",
    )
    with pytest.raises(IdempotencyKeyMismatch) as raised:
        same_request(
            stored,
            request_sha256({"a": "2"}),
            idempotency_key="k",
            entity_id="w-1",
            entity="widget",
            retry_hint="a new widget",
        )

    assert request_sha256({"a": "1", "b": "2"})[:12] in str(raised.value)
    assert request_sha256({"a": "2"})[:12] in str(raised.value)
    assert "widget w-1 with a different request body" in str(raised.value)


def test_a_claim_checked_request_is_compared_by_its_refs_hash() -> None:
    stored = {"requestRef": {"sha256": request_sha256({"a": "1"})}}

    same_request(
        stored,
        request_sha256({"a": "1"}),
        idempotency_key=None,
        entity_id="w",
        entity="widget",
        retry_hint="x",
    )


def test_a_key_bound_by_the_layout_before_is_still_answered_and_still_refuses_another_body(aws: Aws) -> None:
    aws.ddb.put_item(
        TableName=aws.table,
        Item={
            "id": {"S": "request-key#old"},
            "kind": {"S": "request-key"},
            "widgetId": {"S": "w-old"},
            "requestSha256": {"S": request_sha256({"a": "1"})},
        },
    )

    bound = keys(aws).replayed("old", request_sha256({"a": "1"}))

    assert bound is not None and bound.entity_id == "w-old"
    assert keys(aws).replayed("new", request_sha256({"a": "1"})) is None
    with pytest.raises(IdempotencyKeyMismatch):
        keys(aws).replayed("old", request_sha256({"a": "2"}))
