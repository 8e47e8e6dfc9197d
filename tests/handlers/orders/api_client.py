"""Calls of the orders HTTP API handler, as API Gateway (HTTP API, payload 2.0) would make them."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

from tests.builders import ACCOUNT, FakeContext


def http_event(
    method: str,
    path: str,
    *,
    body: str | Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
    user: str = "tester",
) -> dict[str, Any]:
    text = body if isinstance(body, str) or body is None else json.dumps(body)
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"content-type": "application/json", **{k.lower(): v for k, v in (headers or {}).items()}},
        "requestContext": {
            "accountId": ACCOUNT,
            "apiId": "orders-api",
            "authorizer": {"iam": {"accountId": ACCOUNT, "userArn": f"arn:aws:iam::{ACCOUNT}:user/{user}"}},
            "domainName": "orders-api.execute-api.us-east-1.amazonaws.com",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": "pytest",
            },
            "requestId": f"req-{uuid.uuid4().hex[:12]}",
            "routeKey": "$default",
            "stage": "$default",
            "time": "01/May/2024:10:00:00 +0000",
            "timeEpoch": int(time.time() * 1000),
        },
        "body": text,
        "isBase64Encoded": False,
    }


def order_request(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "customerId": "cust-7",
        "items": [{"sku": "SKU-MUG", "quantity": 2}, {"sku": "SKU-TEAPOT", "quantity": 1}],
        "currency": "EUR",
    }
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not None}


def call(method: str, path: str, **kwargs: Any) -> dict[str, Any]:
    from orders.handlers import api

    return api.handler(http_event(method, path, **kwargs), FakeContext())


def post_order(
    body: Mapping[str, Any] | str, *, idempotency_key: str | None = None, user: str = "tester"
) -> dict[str, Any]:
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key is not None else {}
    return call("POST", "/orders", body=body, headers=headers, user=user)


def get_order(order_id: str) -> dict[str, Any]:
    return call("GET", f"/orders/{order_id}")


def cancel(order_id: str) -> dict[str, Any]:
    return call("POST", f"/orders/{order_id}/cancel")


def body_of(response: Mapping[str, Any]) -> Any:
    return json.loads(response["body"])


def placed_order(body: Mapping[str, Any] | None = None) -> str:
    response = post_order(body or order_request())
    assert response["statusCode"] == 201, response
    return str(body_of(response)["orderId"])
