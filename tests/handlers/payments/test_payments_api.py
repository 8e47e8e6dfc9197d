"""POST /payments and GET /operations/{operationId}: the HTTP side of the pipeline."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from relay.claim_check import canonical_bytes
from tests.builders import FakeContext
from tests.handlers.hostile_http import assert_refused, hostile_bodies, readable_encodings, with_body
from tests.handlers.payments.builders import (
    accepted_operation,
    body_of,
    get_operation,
    http_event,
    payment_request,
    post_payment,
    produced_event,
    produced_types,
    steps_of,
)
from tests.handlers.payments.pipeline import BUCKET, Infrastructure

OPENAPI = Path(__file__).resolve().parents[3] / "functions" / "payments" / "openapi.json"


def _nothing_stored(infra: Infrastructure) -> None:
    assert infra.s3_keys() == []
    assert infra.ddb.scan(TableName="payments-operations")["Items"] == []
    assert infra.ddb.scan(TableName="payments-idempotency")["Items"] == []


def test_post_payment_answers_202_with_location_and_pending_status(infra: Infrastructure) -> None:
    response = post_payment(payment_request())

    assert response["statusCode"] == 202
    body = body_of(response)
    assert body["status"] == "PENDING"
    assert response["headers"]["Location"] == f"/operations/{body['operationId']}"


def _operation_items(infra: Infrastructure) -> list[dict[str, Any]]:
    from relay.ddb import deserialize_item

    return [deserialize_item(i) for i in infra.ddb.scan(TableName="payments-operations")["Items"]]


def test_post_payment_is_one_put_of_the_operation_with_its_request_inline_and_its_first_event(
    infra: Infrastructure,
) -> None:
    from payments.wiring import wiring

    request = payment_request()
    calls: list[str] = []
    ddb = wiring().store.ddb
    ddb.meta.events.register("before-call.dynamodb", lambda model, **_: calls.append(model.name))
    operation_id = accepted_operation(request)

    assert calls == ["PutItem"], "accepting is ONE conditional write: no transaction, no read"
    assert infra.s3_keys() == [], "a request below the claim-check threshold stays inline"
    item = infra.operation_item(operation_id)
    assert item is not None
    assert [i["sk"] for i in _operation_items(infra)] == ["OPERATION"], "no outbox row beside it"
    assert infra.ddb.scan(TableName="payments-idempotency")["Items"] == [], "no key item, no marker"
    assert item["status"] == "PENDING" and item["version"] == 1
    # Inline, without what the item holds already; read back whole, byte for byte what was hashed.
    assert json.loads(item["request"]) == {
        k: v for k, v in request.items() if k not in ("paymentId", "orderId")
    }
    assert (item["paymentId"], item["orderId"]) == (request["paymentId"], request["orderId"])
    operation = infra.operation(operation_id)
    assert operation is not None and operation.request.text is not None
    assert json.loads(operation.request.text) == request
    assert item["requestSha256"] == hashlib.sha256(operation.request.text.encode()).hexdigest()
    assert item["requestSha256"] == hashlib.sha256(canonical_bytes(request)).hexdigest()
    assert "requestRef" not in item
    assert steps_of(infra, operation_id) == [("request", "ACCEPTED")]
    assert item["createdAt"] == item["updatedAt"]
    assert item["dueShard"] and item["dueAt"], "in the deadline index from its acceptance"
    (requested,) = infra.item_events(operation_id)
    assert requested.event_type == "PaymentRequested"
    assert requested.ids == {
        "operationId": operation_id,
        "paymentId": request["paymentId"],
        "orderId": "ord-42",
    }
    assert requested.correlation_id
    stored = json.loads(item["ev"][0])
    assert "d" not in stored and "c" not in stored, "the event leaves what the item holds to the item"
    assert stored["x"] == "operationId# paymentId orderId c#"
    assert requested.claim_check is None, "the worker reads the request from the operation"


def test_a_request_above_the_claim_check_threshold_goes_to_s3_with_its_sha256_recorded(
    infra: Infrastructure,
) -> None:
    request = payment_request(details={"blob": "x" * 200_000})  # above the 64 KB threshold
    operation_id = accepted_operation(request)

    (key,) = infra.s3_keys()
    stored = infra.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    sha256 = hashlib.sha256(stored).hexdigest()
    # The request's hash in the key: a retry with another body never overwrites the accepted one.
    assert key == f"payments/{operation_id}/request-{sha256[:16]}.json"
    assert json.loads(stored) == request
    item = infra.operation_item(operation_id)
    assert item is not None and "request" not in item
    assert item["requestRef"]["key"] == key and item["requestRef"]["sha256"] == sha256
    assert item["requestSha256"] == sha256
    view = body_of(get_operation(operation_id))
    assert view["results"]["request"] == f"s3://{BUCKET}/{key}"
    assert produced_event(infra, operation_id, "PaymentRequested").ids["operationId"] == operation_id


def test_get_operation_returns_status_steps_and_timestamps(infra: Infrastructure) -> None:
    operation_id = accepted_operation()

    response = get_operation(operation_id)

    assert response["statusCode"] == 200
    view = body_of(response)
    assert view["operationId"] == operation_id
    assert view["status"] == "PENDING"
    assert view["steps"][0]["step"] == "request" and view["steps"][0]["status"] == "ACCEPTED"
    assert view["createdAt"] and view["updatedAt"]
    assert "error" not in view
    # Only a request above the claim-check threshold has an S3 URI; this one is kept in the operation.
    assert view["results"].get("request") is None


def test_get_unknown_operation_is_404_with_json_error(infra: Infrastructure) -> None:
    response = get_operation("00000000-0000-4000-8000-000000000000")

    assert response["statusCode"] == 404
    assert body_of(response)["error"] == "OperationNotFound"


def test_an_operation_id_is_checked_decoded_as_the_document_describes_it(infra: Infrastructure) -> None:
    from payments.handlers import api

    from tests.builders import FakeContext

    # 20 characters, 80 bytes percent-encoded: API Gateway passes rawPath as sent.
    operation_id = "é" * 20
    sent = "".join(f"%{b:02X}" for b in operation_id.encode())
    response = api.handler(http_event("GET", f"/operations/{sent}"), FakeContext())

    assert response["statusCode"] == 404, response
    assert body_of(response)["message"] == f"no operation {operation_id}"


def test_unknown_route_is_404(infra: Infrastructure) -> None:
    from payments.handlers import api

    from tests.builders import FakeContext

    response = api.handler(http_event("GET", "/refunds"), FakeContext())

    assert response["statusCode"] == 404
    # The documents' error shape (ErrorResponse), not Powertools' own.
    assert body_of(response) == {"error": "NotFound", "message": "nothing at GET /refunds"}


def test_an_operation_id_the_router_cannot_match_is_404_in_the_error_shape(infra: Infrastructure) -> None:
    from payments.handlers import api

    from tests.builders import FakeContext

    response = api.handler(http_event("GET", "/operations/%0Aa%22b"), FakeContext())

    assert response["statusCode"] == 404
    assert set(body_of(response)) == {"error", "message"}


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"amount": "0"}, "amount"),
        ({"amount": "-5.00"}, "amount"),
        ({"amount": "12.345"}, "amount"),  # EUR has 2 minor units
        ({"amount": "100.5", "currency": "JPY"}, "amount"),  # JPY has none
        ({"amount": "abc"}, "amount"),
        ({"amount": 12.5}, "amount"),  # a number, not a decimal string
        ({"currency": "XXX"}, "currency"),
        ({"currency": "eur"}, "currency"),
        ({"paymentId": None}, "paymentId"),
        ({"payer": ""}, "payer"),
        ({"unexpected": 1}, "unexpected"),
    ],
)
def test_invalid_body_is_400_with_field_errors_and_nothing_stored(
    infra: Infrastructure, overrides: dict[str, object], field: str
) -> None:
    response = post_payment(payment_request(**overrides))

    assert response["statusCode"] == 400
    body = body_of(response)
    assert body["error"] == "ValidationError"
    assert field in [f["field"] for f in body["fields"]], body
    _nothing_stored(infra)


def test_amount_with_the_currencys_minor_units_is_accepted(infra: Infrastructure) -> None:
    for amount, currency in (("1000", "JPY"), ("1.234", "KWD"), ("0.01", "USD")):
        assert post_payment(payment_request(amount=amount, currency=currency))["statusCode"] == 202


def test_body_that_is_not_json_is_400(infra: Infrastructure) -> None:
    response = post_payment("{not json")

    assert response["statusCode"] == 400
    _nothing_stored(infra)


@pytest.mark.parametrize("hostile", hostile_bodies(payment_request(), max_body_bytes=1_048_576))
def test_a_body_the_api_cannot_read_is_4xx_never_5xx_and_nothing_is_stored(
    infra: Infrastructure, hostile: tuple[dict[str, object], dict[str, str], int, str]
) -> None:
    from payments.handlers import api

    fields, headers, status, error = hostile
    response = api.handler(with_body(http_event("POST", "/payments"), fields, headers), FakeContext())

    assert_refused(response, status, error)
    _nothing_stored(infra)


@pytest.mark.parametrize("encoding", readable_encodings(payment_request()))
def test_a_valid_body_is_accepted_however_api_gateway_encodes_it(
    infra: Infrastructure, encoding: tuple[dict[str, object], dict[str, str | None]]
) -> None:
    from payments.handlers import api

    fields, headers = encoding
    response = api.handler(with_body(http_event("POST", "/payments"), fields, headers), FakeContext())

    assert response["statusCode"] == 202, response


@pytest.mark.parametrize(
    ("amount", "currency"),
    [("5.", "EUR"), ("012.50", "EUR"), ("0.00", "EUR"), ("0.000", "KWD"), ("1e3", "JPY"), ("+1", "USD")],
)
def test_amounts_outside_the_documented_pattern_are_400(
    infra: Infrastructure, amount: str, currency: str
) -> None:
    from payments.models import PaymentRequest

    response = post_payment(payment_request(amount=amount, currency=currency))

    assert response["statusCode"] == 400, body_of(response)
    assert body_of(response)["fields"][0]["field"] == "amount"
    rules = PaymentRequest.model_json_schema()
    assert not _schema_accepts(rules, amount, currency)


@pytest.mark.parametrize(
    ("amount", "currency"), [("0.1", "KWD"), ("0.001", "BHD"), ("0.05", "EUR"), ("10", "EUR"), ("7", "JPY")]
)
def test_amounts_the_document_allows_are_accepted(infra: Infrastructure, amount: str, currency: str) -> None:
    from payments.models import PaymentRequest

    assert _schema_accepts(PaymentRequest.model_json_schema(), amount, currency)
    assert post_payment(payment_request(amount=amount, currency=currency))["statusCode"] == 202


def _schema_accepts(schema: dict[str, object], amount: str, currency: str) -> bool:
    """The checked-in rules (field pattern, currency enum, per-currency if/then) applied by hand."""
    import re

    properties: dict[str, dict[str, object]] = schema["properties"]  # type: ignore[assignment]
    if currency not in properties["currency"]["enum"]:  # type: ignore[operator]
        return False
    patterns = [str(properties["amount"]["pattern"])]
    for rule in schema["allOf"]:  # type: ignore[attr-defined]
        if currency in rule["if"]["properties"]["currency"]["enum"]:
            patterns.append(rule["then"]["properties"]["amount"]["pattern"])
    return all(re.search(p, amount) for p in patterns)


def test_body_over_the_maximum_is_413_before_parsing(
    infra: Infrastructure, monkeypatch: pytest.MonkeyPatch
) -> None:
    from relay.wiring import reset_all

    monkeypatch.setenv("MAX_BODY_BYTES", "1000")
    reset_all()

    too_big = post_payment(payment_request(details={"blob": "x" * 1000}))
    not_json_but_too_big = post_payment("x" * 1001)
    fits = post_payment(payment_request())

    assert too_big["statusCode"] == 413
    assert body_of(too_big)["error"] == "PayloadTooLarge"
    assert not_json_but_too_big["statusCode"] == 413
    assert fits["statusCode"] == 202


def test_same_idempotency_key_and_body_returns_the_same_operation_without_storing_again(
    infra: Infrastructure,
) -> None:
    request = payment_request()
    first = post_payment(request, idempotency_key="client-key-1")
    stored = infra.operation_item(body_of(first)["operationId"])
    # Same JSON, different formatting and key order: still the same request.
    second = post_payment(
        json.dumps(dict(reversed(list(request.items()))), indent=2), idempotency_key="client-key-1"
    )

    assert first["statusCode"] == second["statusCode"] == 202
    assert body_of(first)["operationId"] == body_of(second)["operationId"]
    assert second["headers"]["Location"] == first["headers"]["Location"]
    # Exactly one operation item, unchanged by the retry; no request-key item, no claim check.
    assert [i["pk"] for i in _operation_items(infra)] == [f"OPERATION#{body_of(first)['operationId']}"]
    assert infra.operation_item(body_of(first)["operationId"]) == stored
    assert infra.ddb.scan(TableName="payments-idempotency")["Items"] == []
    assert infra.s3_keys() == []
    assert produced_types(infra, body_of(first)["operationId"]) == ["PaymentRequested"]


def test_same_idempotency_key_with_a_different_body_is_422_and_nothing_stored(infra: Infrastructure) -> None:
    first = post_payment(payment_request(amount="10.00"), idempotency_key="client-key-2")
    operation_id = body_of(first)["operationId"]
    stored = infra.operation_item(operation_id)
    second = post_payment(payment_request(amount="99.00"), idempotency_key="client-key-2")

    assert first["statusCode"] == 202
    assert second["statusCode"] == 422
    body = body_of(second)
    assert body["error"] == "IdempotencyKeyMismatch"
    assert "different request body" in body["message"] and operation_id in body["message"]
    assert [i["pk"] for i in _operation_items(infra)] == [f"OPERATION#{operation_id}"]
    assert infra.operation_item(operation_id) == stored, "the accepted request is left as it was"
    assert json.loads(stored["request"])["amount"] == "10.00"  # type: ignore[index]
    assert infra.ddb.scan(TableName="payments-idempotency")["Items"] == []
    assert infra.s3_keys() == []


def test_a_large_request_retried_with_a_different_body_never_overwrites_the_accepted_claim_check(
    infra: Infrastructure,
) -> None:
    accepted = payment_request(amount="10.00", details={"blob": "x" * 100_000})
    first = post_payment(accepted, idempotency_key="client-key-3")
    second = post_payment({**accepted, "amount": "99.00"}, idempotency_key="client-key-3")

    assert first["statusCode"] == 202 and second["statusCode"] == 422
    item = infra.operation_item(body_of(first)["operationId"])
    assert item is not None
    stored = infra.s3.get_object(Bucket=BUCKET, Key=item["requestRef"]["key"])["Body"].read()
    assert json.loads(stored) == accepted
    assert hashlib.sha256(stored).hexdigest() == item["requestRef"]["sha256"] == item["requestSha256"]


def test_without_idempotency_key_every_post_is_a_new_operation(infra: Infrastructure) -> None:
    request = payment_request()

    first = accepted_operation(request)
    second = accepted_operation(request)

    assert first != second
    assert sorted(i["pk"] for i in _operation_items(infra)) == sorted(
        [f"OPERATION#{first}", f"OPERATION#{second}"]
    )
    for operation_id in (first, second):
        assert produced_types(infra, operation_id) == ["PaymentRequested"]


def test_the_same_key_from_two_callers_names_two_operations(infra: Infrastructure) -> None:
    from payments.store import OperationStore

    from relay.request_keys import derived_id

    request = payment_request()

    alice = post_payment(request, idempotency_key="shared-key", user="alice")
    bob = post_payment(request, idempotency_key="shared-key", user="bob")

    assert alice["statusCode"] == bob["statusCode"] == 202
    assert body_of(alice)["operationId"] != body_of(bob)["operationId"]
    assert body_of(alice)["operationId"] == derived_id(
        OperationStore.ID_NAMESPACE, "arn:aws:iam::123456789012:user/alice", "shared-key"
    )
    assert len(_operation_items(infra)) == 2


def test_concurrent_request_with_the_same_key_is_answered_as_the_winners_replay(
    infra: Infrastructure,
) -> None:
    """Two requests with one key name one operation: the loser's conditional PutItem fails, and the
    failed condition's ALL_OLD (the winner's operation) answers it -- no read before, none after, so
    there is no window in which both could create."""
    from payments.intake import accept_payment
    from payments.models import PaymentRequest
    from payments.wiring import wiring

    request = PaymentRequest.model_validate(payment_request())
    rt = wiring()

    def accept(correlation_id: str) -> Any:
        return accept_payment(
            request,
            idempotency_key="race",
            correlation_id=correlation_id,
            store=rt.store,
            s3_client=rt.s3,
            bucket=BUCKET,
            now=rt.clock(),
        )

    winner = accept("c1")
    calls: list[str] = []
    rt.store.ddb.meta.events.register("before-call.dynamodb", lambda model, **_: calls.append(model.name))

    loser = accept("c2")

    assert calls == ["PutItem"], "the loser learns of the winner from its own failed write"
    assert loser.operation_id == winner.operation_id and loser.replayed and not winner.replayed
    (operation,) = _operation_items(infra)
    assert operation.get("correlationId", winner.operation_id) == "c1", "the winner's operation, untouched"


def test_a_key_bound_before_the_one_write_layout_is_still_answered_while_the_stage_looks_for_them(
    infra: Infrastructure, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Upgrading a stage: request-key items of the layout before (``REQUEST_KEY_ITEMS``) answer a
    client's retry with the operation they bound, and a different body is still a 422."""
    from payments.wiring import wiring

    from relay.request_keys import request_sha256
    from relay.wiring import reset_all

    monkeypatch.setenv("REQUEST_KEY_ITEMS", "true")
    reset_all()
    request = payment_request()
    operation_id = accepted_operation(request)  # stands for one accepted before the upgrade
    infra.ddb.put_item(  # the request-key item the layout before wrote with the operation
        TableName=wiring().store.idempotency_table,
        Item={
            "id": {"S": "request-key#old-key"},
            "kind": {"S": "request-key"},
            "operationId": {"S": operation_id},
            "requestSha256": {"S": request_sha256(request)},
        },
    )

    retry = post_payment(request, idempotency_key="old-key")
    other = post_payment(payment_request(amount="99.00"), idempotency_key="old-key")

    assert retry["statusCode"] == 202 and body_of(retry)["operationId"] == operation_id
    assert other["statusCode"] == 422 and body_of(other)["error"] == "IdempotencyKeyMismatch"
    assert len(_operation_items(infra)) == 1


def test_invalid_idempotency_key_header_is_400(infra: Infrastructure) -> None:
    response = post_payment(payment_request(), idempotency_key="x" * 256)

    assert response["statusCode"] == 400
    assert any("idempotency-key" in f["field"].lower() for f in body_of(response)["fields"])


def test_checked_in_openapi_document_is_current() -> None:
    from payments.handlers.api import openapi_document

    assert OPENAPI.exists(), (
        "functions/payments/openapi.json is missing; generate it (see payments.handlers.api)"
    )
    assert OPENAPI.read_text() == openapi_document(), (
        "functions/payments/openapi.json is stale: regenerate it with "
        "PYTHONPATH=layers/relay/python:functions python -m payments.handlers.api "
        "> functions/payments/openapi.json"
    )
