"""Who may call the app's HTTP APIs, end to end through the sandbox (issue 31): every route the synthesized
templates declare `AWS_IAM` answers 403 to an unsigned request and to one signed by an identity without
`execute-api:Invoke` (`relay-local-denied`), and a documented answer, never 401/403, to one signed by the
allowed caller (`relay-local-client`), as API Gateway does. And a refused `POST /payments` stores and
publishes nothing: the same Idempotency-Key, signed, then creates the one operation.

The routes are read from the templates (`sandbox.topology.apis`), so a route added later is walked too;
path parameters are filled with an unknown id. Only `POST /score-snapshots` is not AWS_IAM (its Lambda
authorizer checks an API key, test_agents_e2e)."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests

from emulator import callers
from emulator.server import client
from local.sandbox import Sandbox
from tests.e2e import api
from tests.e2e.test_payments_e2e import payment, wait_terminal

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
NOT_AWS_IAM = {"POST /score-snapshots"}
_PARAMETER = re.compile(r"\{[^}]+\}")

Send = Callable[[str, str, dict[str, Any]], requests.Response]


def iam_routes(sb: Sandbox) -> list[str]:
    """Every `AWS_IAM` route key the synthesized APIs declare (`GET /operations/{operationId}`)."""
    return sorted(
        route.route_key
        for spec in sb.topology.apis
        for route in spec.routes
        if route.authorization == "AWS_IAM"
    )


def documented() -> dict[str, set[str]]:
    """Route key -> the statuses the checked-in OpenAPI documents give it."""
    answers: dict[str, set[str]] = {}
    for path in sorted(ROOT.glob("functions/*/openapi.json")):
        for route, operations in json.loads(path.read_text())["paths"].items():
            for method, operation in operations.items():
                if isinstance(operation, dict) and "responses" in operation:
                    answers[f"{method.upper()} {route}"] = set(operation["responses"])
    return answers


def concrete(route_key: str) -> tuple[str, str]:
    """The route's method and a path with every parameter an id nothing has."""
    method, template = route_key.split(" ", 1)
    return method, _PARAMETER.sub(lambda _: f"unknown-{uuid.uuid4().hex[:12]}", template)


def request_for(method: str) -> dict[str, Any]:
    """A POST carries an empty JSON object (invalid for every create route: 400, nothing stored) and a
    fresh Idempotency-Key; a GET nothing."""
    if method != "POST":
        return {}
    return {"json": {}, "headers": {"Idempotency-Key": uuid.uuid4().hex}}


def walk(sb: Sandbox, send: Send) -> dict[str, requests.Response]:
    answers = {}
    for route_key in iam_routes(sb):
        method, path = concrete(route_key)
        answers[route_key] = send(method, f"{sb.api_url}{path}", request_for(method))
    return answers


def statuses(answers: dict[str, requests.Response]) -> dict[str, int]:
    return {route: r.status_code for route, r in answers.items()}


def test_every_route_but_the_api_key_one_is_aws_iam_and_documented(sandbox: Sandbox) -> None:
    every = {route.route_key for spec in sandbox.topology.apis for route in spec.routes}
    routes = iam_routes(sandbox)

    assert routes and set(routes) == every - NOT_AWS_IAM, sorted(every)
    assert set(routes) <= set(documented()), sorted(set(routes) - set(documented()))


def test_an_unsigned_request_to_every_aws_iam_route_is_403(sandbox: Sandbox) -> None:
    answers = walk(sandbox, lambda method, url, kw: requests.request(method, url, timeout=30, **kw))

    assert statuses(answers) == dict.fromkeys(answers, 403), {r: a.text for r, a in answers.items()}
    assert {a.content for a in answers.values()} == {b'{"message":"Missing Authentication Token"}'}


class TamperedSignature(requests.auth.AuthBase):
    """Signs as the allowed client, then changes the signature's last digit: a signature that does not
    match, from a key that exists and may invoke every route."""

    def __init__(self, sb: Sandbox) -> None:
        self.signer = sb.client_auth()

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        signed = self.signer(request)
        authorization = signed.headers["Authorization"]
        last = "0" if authorization[-1] != "0" else "1"
        signed.headers["Authorization"] = authorization[:-1] + last
        return signed


def test_a_request_with_a_signature_that_does_not_match_is_403_on_every_aws_iam_route(
    sandbox: Sandbox,
) -> None:
    tampered = TamperedSignature(sandbox)
    answers = walk(
        sandbox, lambda method, url, kw: requests.request(method, url, auth=tampered, timeout=30, **kw)
    )

    assert statuses(answers) == dict.fromkeys(answers, 403), {r: a.text for r, a in answers.items()}
    kinds = {a.headers.get("x-amzn-errortype") for a in answers.values()}
    assert kinds == {"InvalidSignatureException"}, kinds
    assert all(
        a.json()["message"].startswith("The request signature we calculated does not match")
        for a in answers.values()
    )


def test_a_request_signed_by_an_identity_without_the_grant_is_403_on_every_aws_iam_route(
    sandbox: Sandbox,
) -> None:
    denied = sandbox.client_auth(callers.DENIED)
    answers = walk(
        sandbox, lambda method, url, kw: requests.request(method, url, auth=denied, timeout=30, **kw)
    )

    assert statuses(answers) == dict.fromkeys(answers, 403), {r: a.text for r, a in answers.items()}


def test_a_request_signed_by_the_client_gets_a_documented_answer_never_401_or_403(sandbox: Sandbox) -> None:
    allowed = sandbox.client_auth()
    answers = walk(
        sandbox, lambda method, url, kw: requests.request(method, url, auth=allowed, timeout=30, **kw)
    )
    docs = documented()

    wrong = {
        route: (r.status_code, r.text[:200])
        for route, r in answers.items()
        if r.status_code in (401, 403) or r.status_code >= 500 or str(r.status_code) not in docs[route]
    }
    assert not wrong, wrong
    # The unknown ids and the empty bodies reached the handlers: their own answers, not the gateway's.
    assert all("x-amzn-errortype" not in r.headers for r in answers.values()), statuses(answers)


# A refused request has no effect ------------------------------------------------------------------


def environment(sb: Sandbox, route_key: str, name: str) -> str:
    """A setting of the function serving the route (its table names)."""
    (function,) = [r.function for s in sb.topology.apis for r in s.routes if r.route_key == route_key]
    env = {k.upper(): v for k, v in sb.topology.functions[function].environment.items()}
    return env[name]


def operations_of(sb: Sandbox, payment_id: str) -> list[str]:
    """The operations stored for the payment (the table's operation items carry the paymentId)."""
    ddb = client("dynamodb", sb.endpoint)
    table = environment(sb, "POST /payments", "OPERATIONS_TABLE")
    found: list[str] = []
    pages = ddb.get_paginator("scan").paginate(
        TableName=table,
        FilterExpression="paymentId = :p AND sk = :sk",
        ExpressionAttributeValues={":p": {"S": payment_id}, ":sk": {"S": "OPERATION"}},
        ConsistentRead=True,
    )
    for page in pages:
        found.extend(item["pk"]["S"].removeprefix("OPERATION#") for item in page["Items"])
    return found


def legacy_payments_of(sb: Sandbox, payment_id: str) -> list[str]:
    """The operations the legacy payment system was asked to pay this payment for."""
    views = (sb.legacy.payment(key) for key in sb.legacy.charges())
    return [str(v["operationId"]) for v in views if v is not None and v["paymentId"] == payment_id]


def test_a_refused_payment_stores_and_publishes_nothing_and_the_signed_retry_creates_one_operation(
    sandbox: Sandbox,
) -> None:
    body, key = payment(payer="callers-e2e"), uuid.uuid4().hex
    url = f"{sandbox.api_url}/payments"

    refused = requests.post(url, json=body, headers={"Idempotency-Key": key}, timeout=30)
    denied = requests.post(
        url, json=body, headers={"Idempotency-Key": key}, auth=sandbox.client_auth(callers.DENIED), timeout=30
    )

    assert (refused.status_code, denied.status_code) == (403, 403), (refused.text, denied.text)
    assert "operationId" not in refused.text and "operationId" not in denied.text
    time.sleep(2)  # an operation, had one been written, would be on its way to the worker by now
    assert operations_of(sandbox, body["paymentId"]) == []
    assert legacy_payments_of(sandbox, body["paymentId"]) == []

    accepted = api.post(sandbox, "/payments", json=body, headers={"Idempotency-Key": key})

    assert accepted.status_code == 202, accepted.text
    operation_id = accepted.json()["operationId"]
    view = wait_terminal(sandbox, operation_id)
    assert (view["operationId"], view["paymentId"], view["status"]) == (
        operation_id,
        body["paymentId"],
        "COMPLETED",
    )
    # The key names that operation: the signed retry is answered with it, and nothing more is stored.
    replay = api.post(sandbox, "/payments", json=body, headers={"Idempotency-Key": key})
    assert (replay.status_code, replay.json()["operationId"]) == (202, operation_id), replay.text
    assert operations_of(sandbox, body["paymentId"]) == [operation_id]
    # Published once, for this operation alone: the one charge the payment ever caused.
    assert legacy_payments_of(sandbox, body["paymentId"]) == [operation_id]
    assert sandbox.legacy.charges_by_operation()[operation_id] == 1
