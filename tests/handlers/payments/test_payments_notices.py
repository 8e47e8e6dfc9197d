"""Completion notices: a callbackUrl is checked (SSRF guard) when accepted; when the operation ends, the
notice sender POSTs {operationId, status, paymentId, orderId, completedAt, error?} once, signed with the
deployment's Secrets Manager key, retried while the receiver fails and parked with the reason when it
refuses; a receiver that answered 2xx is never notified again, whatever the duplicate deliveries."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from local.fakes.invoice_api import InvoiceApiFake
from local.fakes.legacy_payments import LegacyPaymentsFake
from local.fakes.webhook import WebhookFake
from tests.handlers.payments.builders import (
    accepted_operation,
    body_of,
    deliver,
    failed_ids,
    payment_request,
    post_payment,
    produced_event,
)
from tests.handlers.payments.pipeline import Infrastructure, Pump
from tests.handlers.payments.test_payments_cancel import cancel


def signing_secret(infra: Infrastructure) -> str:
    arn = infra.env()["NOTICE_SIGNING_SECRET_ARN"]
    from tests.handlers.stack_world import aws

    return str(aws("secretsmanager").get_secret_value(SecretId=arn)["SecretString"])


@pytest.fixture
def receiver(infra: Infrastructure) -> Iterator[WebhookFake]:
    fake = WebhookFake(signing_secret=signing_secret(infra))
    fake.start()
    yield fake
    fake.stop()


def run_notices(event: dict[str, Any]) -> dict[str, Any]:
    from payments.handlers import notice_sender

    from tests.builders import FakeContext

    return notice_sender.handler(event, FakeContext())


def notices(receiver: WebhookFake) -> list[dict[str, Any]]:
    return [d for d in receiver.deliveries() if d["path"] == "/relay/notices"]


def completed_with_callback(infra: Infrastructure, receiver: WebhookFake, **request: Any) -> str:
    operation_id = accepted_operation(
        payment_request(callbackUrl=f"{receiver.base_url}/relay/notices", **request)
    )
    Pump(infra).run()
    return operation_id


def test_a_completed_operation_notifies_its_callback_once_signed_with_the_deployments_key(
    infra: Infrastructure, legacy: LegacyPaymentsFake, invoice_api: InvoiceApiFake, receiver: WebhookFake
) -> None:
    operation_id = completed_with_callback(infra, receiver, orderId="ord-7")

    (notice,) = notices(receiver)
    assert notice["signature"] == "valid"
    assert notice["key"] == f"{operation_id}:notice" == notice["headers"]["webhook-id"]
    # What a receiver does: one call of the Standard Webhooks library, with the key handed out as whsec_.
    handed_out = "whsec_" + signing_secret(infra).removeprefix("whsec_")
    assert (
        Webhook(handed_out).verify(notice["raw"].encode(), notice["headers"])["operationId"] == operation_id
    )
    assert "relay-signature" not in notice["headers"]
    item = infra.operation_item(operation_id)
    assert item is not None and item["status"] == "COMPLETED"
    assert notice["body"] == {
        "operationId": operation_id,
        "status": "COMPLETED",
        "paymentId": item["paymentId"],
        "orderId": "ord-7",
        "completedAt": item["updatedAt"],
    }
    assert receiver.notices_by_key() == {f"{operation_id}:notice": {"valid": 1}}


def test_a_duplicate_terminal_event_does_not_notify_again(
    infra: Infrastructure, legacy: LegacyPaymentsFake, invoice_api: InvoiceApiFake, receiver: WebhookFake
) -> None:
    operation_id = completed_with_callback(infra, receiver)  # the Pump delivers every batch twice
    completed = produced_event(infra, operation_id, "OperationCompleted")

    assert failed_ids(run_notices(deliver(infra, "notices", completed, completed))) == []

    assert receiver.notices_by_key() == {f"{operation_id}:notice": {"valid": 1}}


def test_an_operation_without_a_callback_sends_nothing(
    infra: Infrastructure, legacy: LegacyPaymentsFake, invoice_api: InvoiceApiFake, receiver: WebhookFake
) -> None:
    operation_id = accepted_operation(payment_request())
    pump = Pump(infra)
    pump.run()

    assert infra.operation_item(operation_id)["status"] == "COMPLETED"  # type: ignore[index]
    assert receiver.deliveries() == []
    assert infra.receive_all(infra.queues["notices"].dlq_url) == []
    # The terminal event never reached the notices queue: its SNS filter wants notice=yes.
    assert pump.invocations.get("notices", 0) == 0


def test_only_terminal_events_of_operations_with_a_callback_carry_notice_yes() -> None:
    from payments.subscriptions import NOTICES_FILTER, message_attributes

    from relay.envelope import new_envelope

    def event(event_type: str) -> object:
        return new_envelope(
            event_type,
            identity=["op-1", event_type],
            ids={"operationId": "op-1"},
            payload={},
            correlation_id="c",
        )

    assert NOTICES_FILTER["notice"] == ["yes"]
    assert message_attributes(event("OperationCompleted"), {"callbackUrl": "https://x.example/n"}) == {
        "notice": "yes"
    }
    assert message_attributes(event("OperationCompleted"), {}) == {"notice": "no"}
    assert message_attributes(event("PaymentRequested"), {"callbackUrl": "https://x.example/n"}) == {}
    # A row of the old layout does not hold the operation: "yes", and the sender reads the operation.
    assert message_attributes(event("PaymentFailed"), {"kind": "outbox"}) == {"notice": "yes", "order": "no"}


def test_a_cancelled_operation_is_notified_with_its_status_and_reason(
    infra: Infrastructure, legacy: LegacyPaymentsFake, invoice_api: InvoiceApiFake, receiver: WebhookFake
) -> None:
    operation_id = accepted_operation(payment_request(callbackUrl=f"{receiver.base_url}/relay/notices"))
    assert cancel(operation_id, {"reason": "changed my mind"})["statusCode"] == 200
    Pump(infra).run()

    (notice,) = notices(receiver)
    assert notice["signature"] == "valid"
    assert notice["body"]["status"] == "CANCELLED"
    assert notice["body"]["error"] == {"code": "Cancelled", "message": "changed my mind"}
    assert legacy.calls() == []


def test_a_receiver_that_fails_is_retried_and_notified_once_it_answers(
    infra: Infrastructure, legacy: LegacyPaymentsFake, invoice_api: InvoiceApiFake, receiver: WebhookFake
) -> None:
    receiver.set_knobs(outage=True)
    operation_id = completed_with_callback(infra, receiver)
    assert notices(receiver) == []
    completed = produced_event(infra, operation_id, "OperationCompleted")
    receiver.set_knobs(outage=False)

    # The kernel re-sent a delayed copy on each failure; delivering the event again stands for it.
    assert failed_ids(run_notices(deliver(infra, "notices", completed))) == []

    assert receiver.notices_by_key() == {f"{operation_id}:notice": {"valid": 1}}
    assert infra.receive_all(infra.queues["notices"].dlq_url) == []


def test_a_receiver_that_refuses_the_notice_gets_it_parked_with_the_reason(
    infra: Infrastructure, legacy: LegacyPaymentsFake, invoice_api: InvoiceApiFake
) -> None:
    # The invoice fake answers 404 on a path it does not serve: a receiver refusing the notice.
    accepted_operation(payment_request(callbackUrl=f"{invoice_api.base_url}/no-such-receiver"))

    Pump(infra, deliveries=1).run()

    (parked,) = infra.receive_all(infra.queues["notices"].dlq_url)
    reason = parked["MessageAttributes"]["relay.errorMessage"]["StringValue"]
    assert "404" in reason, reason


@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.example.com/cb",  # http
        "https://169.254.169.254/latest/meta-data",  # an IP literal (link-local: the metadata endpoint)
        "https://10.0.0.7/cb",  # an IP literal (private)
        "https://localhost/cb",
        "https://user:pw@hooks.example.com/cb",
        "https://hooks.example.com/cb#frag",
        "ftp://hooks.example.com/cb",
        "not a url at all",
    ],
)
def test_a_callback_url_outside_the_documented_shape_is_400_on_the_field_and_nothing_is_stored(
    infra: Infrastructure, url: str
) -> None:
    response = post_payment(payment_request(callbackUrl=url))

    assert response["statusCode"] == 400, response
    (field,) = body_of(response)["fields"]
    assert field["field"] == "callbackUrl"
    assert infra.s3_keys() == []


def test_a_host_name_is_accepted_without_a_dns_lookup_and_checked_when_the_notice_is_sent(
    infra: Infrastructure,
    legacy: LegacyPaymentsFake,
    invoice_api: InvoiceApiFake,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The API's answer depends on the request alone; the sender resolves the host, and a host that
    # resolves to a private address is never sent to: the notice is parked with the reason.
    import socket

    looked_up: list[str] = []
    real = socket.getaddrinfo

    def private(host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        if host != "hooks.internal.example":
            return real(host, port, *args, **kwargs)  # the fakes on 127.0.0.1
        looked_up.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.2.3", port))]

    monkeypatch.setattr(socket, "getaddrinfo", private)
    operation_id = accepted_operation(payment_request(callbackUrl="https://hooks.internal.example/relay"))
    assert looked_up == []

    Pump(infra, deliveries=1).run()

    assert "hooks.internal.example" in looked_up
    (parked,) = infra.receive_all(infra.queues["notices"].dlq_url)
    reason = parked["MessageAttributes"]["relay.errorMessage"]["StringValue"]
    assert "10.1.2.3" in reason and "private" in reason, reason
    assert infra.operation_item(operation_id)["status"] == "COMPLETED"  # type: ignore[index]


def test_on_aws_a_loopback_callback_is_refused(
    infra: Infrastructure, monkeypatch: pytest.MonkeyPatch
) -> None:
    from relay.wiring import reset_all

    monkeypatch.setenv("CALLBACK_ALLOW_LOOPBACK_HTTP", "false")
    reset_all()

    response = post_payment(payment_request(callbackUrl="http://127.0.0.1:8080/cb"))

    assert response["statusCode"] == 400
    assert body_of(response)["fields"][0]["field"] == "callbackUrl"


def test_a_public_https_callback_is_accepted_and_kept_on_the_operation(infra: Infrastructure) -> None:
    operation_id = accepted_operation(payment_request(callbackUrl="https://hooks.example.com/relay?k=1"))

    item = infra.operation_item(operation_id)
    assert item is not None and item["callbackUrl"] == "https://hooks.example.com/relay?k=1"
