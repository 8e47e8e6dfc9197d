"""Signed completion notices end to end: relay.http signs the exact bytes it sends, and the webhook fake
checks them with relay.signing over the raw body it received, recording a verdict per delivery.

Here rather than in tests/unit: the fake is a real HTTP server on 127.0.0.1 (tests/unit is socket-free).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest
import requests

from local.fakes.webhook import WebhookFake
from relay.http import WebhookClient
from relay.signing import SIGNATURE_HEADER, sign, signature_headers

SECRET = "whsec_" + base64.b64encode(b"test-secret-of-32-bytes-or-more!").decode()
OTHER = "whsec_" + base64.b64encode(b"someone-else-s-secret-of-32-byte").decode()
KEY = "op-1:completed"
NOTICE = {"operationId": "op-1", "status": "COMPLETED", "amount": "12.50"}
TIMEOUT = 5.0


@pytest.fixture
def hook() -> Iterator[WebhookFake]:
    with WebhookFake(signing_secret=SECRET) as running:
        yield running


def client(hook: WebhookFake) -> WebhookClient:
    return WebhookClient(f"{hook.base_url}/notices", timeout_seconds=TIMEOUT, what="client callback")


def only_verdict(hook: WebhookFake) -> str:
    (delivery,) = hook.deliveries()
    verdict: str = delivery["signature"]
    return verdict


def test_a_notice_signed_with_the_receivers_secret_is_valid(hook: WebhookFake) -> None:
    answer = client(hook).send(NOTICE, idempotency_key=KEY, sign=signature_headers(SECRET, KEY))

    assert answer == {"status": 204}
    assert only_verdict(hook) == "valid"
    (delivery,) = hook.deliveries()
    assert delivery["body"] == NOTICE and SIGNATURE_HEADER in delivery["headers"]
    assert delivery["headers"]["webhook-id"] == KEY == delivery["key"]  # webhook-id is the idempotency key
    assert hook.notices_by_key() == {KEY: {"valid": 1}}


def test_a_notice_signed_with_another_secret_is_invalid(hook: WebhookFake) -> None:
    client(hook).send(NOTICE, idempotency_key=KEY, sign=signature_headers(OTHER, KEY))

    verdict = only_verdict(hook)
    assert verdict.startswith("invalid: ") and "does not match the body" in verdict


def test_a_notice_sent_without_sign_is_invalid_for_a_receiver_that_checks(hook: WebhookFake) -> None:
    client(hook).send(NOTICE, idempotency_key=KEY)

    verdict = only_verdict(hook)
    assert verdict.startswith("invalid: ") and "no webhook-signature header" in verdict


def test_a_receiver_without_a_secret_records_every_notice_as_unsigned() -> None:
    with WebhookFake() as unchecked:
        client(unchecked).send(NOTICE, idempotency_key=KEY, sign=signature_headers(SECRET, KEY))
        client(unchecked).send(NOTICE, idempotency_key=KEY)

        assert unchecked.notices_by_key() == {KEY: {"unsigned": 2}}


def test_the_signature_is_over_the_bytes_sent_not_a_re_encoding_of_the_notice(hook: WebhookFake) -> None:
    # Signing what post_json sends (compact, sorted keys) and sending other bytes of the same JSON fails.
    sent = b'{"amount":"12.50","operationId":"op-1","status":"COMPLETED"}'
    other_spacing = b'{"amount": "12.50", "operationId": "op-1", "status": "COMPLETED"}'
    headers = {"Content-Type": "application/json", **sign(SECRET, KEY, sent)}

    requests.post(f"{hook.base_url}/notices", data=sent, headers=headers, timeout=TIMEOUT)
    requests.post(f"{hook.base_url}/notices", data=other_spacing, headers=headers, timeout=TIMEOUT)

    valid, invalid = (d["signature"] for d in hook.deliveries())
    assert valid == "valid" and invalid.startswith("invalid: ")


def test_notices_are_counted_per_key_and_verdict_and_served_as_an_admin_view(hook: WebhookFake) -> None:
    client(hook).send(NOTICE, idempotency_key=KEY, sign=signature_headers(SECRET, KEY))
    client(hook).send(NOTICE, idempotency_key=KEY, sign=signature_headers(SECRET, KEY))
    client(hook).send(NOTICE, idempotency_key="op-2:completed")

    counts = hook.notices_by_key()
    assert counts[KEY] == {"valid": 2}
    ((verdict, count),) = counts["op-2:completed"].items()
    assert verdict.startswith("invalid: ") and count == 1
    view = requests.get(f"{hook.base_url}/_admin/notices-by-key", timeout=TIMEOUT).json()
    assert view == counts
    assert hook.deliveries_by_key() == {KEY: 2, "op-2:completed": 1}  # unchanged by signing


def test_the_secret_can_be_set_and_cleared_at_run_time_and_reset_restores_the_constructors() -> None:
    with WebhookFake() as hook:
        url = f"{hook.base_url}/_admin/signing-secret"

        answer = requests.post(url, json={"secret": SECRET}, timeout=TIMEOUT)
        assert answer.status_code == 200 and SECRET not in answer.text  # never echoed
        client(hook).send(NOTICE, idempotency_key=KEY, sign=signature_headers(SECRET, KEY))
        assert requests.post(url, json={"secret": None}, timeout=TIMEOUT).status_code == 200
        client(hook).send(NOTICE, idempotency_key=KEY, sign=signature_headers(SECRET, KEY))
        assert hook.notices_by_key() == {KEY: {"valid": 1, "unsigned": 1}}

        hook.set_signing_secret(SECRET)
        hook.reset()
        client(hook).send(NOTICE, idempotency_key=KEY, sign=signature_headers(SECRET, KEY))
        assert hook.notices_by_key() == {KEY: {"unsigned": 1}}


@pytest.mark.parametrize("payload", [{"secret": ""}, {"secret": 7}, {}, ["whsec"]])
def test_the_admin_route_refuses_a_secret_that_is_not_a_non_empty_string(
    hook: WebhookFake, payload: dict[str, str | int] | list[str]
) -> None:
    answer = requests.post(f"{hook.base_url}/_admin/signing-secret", json=payload, timeout=TIMEOUT)

    assert answer.status_code == 400 and "non-empty string" in answer.json()["message"]
    client(hook).send(NOTICE, idempotency_key=KEY, sign=signature_headers(SECRET, KEY))
    assert only_verdict(hook) == "valid"  # the secret in force is unchanged
