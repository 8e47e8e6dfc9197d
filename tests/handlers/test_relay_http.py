"""relay.http against a real HTTP server on 127.0.0.1: statuses returned, redirects not followed,
refused connections turned into DependencyUnavailable, and timeouts and connections dropped after the
request was sent into OutcomeUnknown (both transient)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from relay.errors import BusinessRejection, DependencyUnavailable, OutcomeUnknown, TransientError
from relay.http import KeyedApi, WebhookClient, post_json


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length))
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
            self.end_headers()
            return
        if self.path == "/slow":
            time.sleep(1.0)
        if self.path == "/hang-up":  # read the request, then close without a word
            self.close_connection = True
            return
        if self.path == "/truncated":  # promise 100 bytes, send 10, close
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", "100")
            self.end_headers()
            self.wfile.write(b'{"status":')
            self.close_connection = True
            return
        if self.path == "/bad-gateway":
            self.send_response(502)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        status = 429 if self.path == "/busy" else 200
        payload = json.dumps({"echo": body, "key": self.headers.get("Idempotency-Key")}).encode()
        self.send_response(status)
        if status == 429:
            self.send_header("Retry-After", "7")
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_json_answer_is_parsed_and_headers_are_sent(base_url: str) -> None:
    response = post_json(
        f"{base_url}/ok", {"a": 1}, headers={"Idempotency-Key": "op-1:payment"}, timeout=5, what="fake"
    )
    assert response.status == 200
    assert response.body == {"echo": {"a": 1}, "key": "op-1:payment"}


def test_status_and_retry_after_are_returned_for_the_caller_to_classify(base_url: str) -> None:
    response = post_json(f"{base_url}/busy", {}, headers={}, timeout=5, what="fake")
    assert (response.status, response.retry_after) == (429, 7.0)


def test_redirects_are_returned_not_followed(base_url: str) -> None:
    response = post_json(f"{base_url}/redirect", {}, headers={}, timeout=5, what="fake")
    assert response.status == 302


def test_a_timeout_is_transient(base_url: str) -> None:
    with pytest.raises(DependencyUnavailable, match=r"fake did not answer within 0.2 s") as raised:
        post_json(f"{base_url}/slow", {}, headers={}, timeout=0.2, what="fake")
    # Waiting for the answer timed out: the request was sent, it may have taken effect.
    assert isinstance(raised.value, OutcomeUnknown)
    assert "may have taken effect" in str(raised.value)


def test_a_refused_connection_is_transient() -> None:
    with pytest.raises(TransientError, match="unreachable"):
        post_json("http://127.0.0.1:9/x", {}, headers={}, timeout=2, what="nobody")


def test_a_refused_connection_is_not_outcome_unknown_the_request_never_left() -> None:
    with pytest.raises(DependencyUnavailable) as raised:
        post_json("http://127.0.0.1:9/x", {}, headers={}, timeout=2, what="nobody")
    assert not isinstance(raised.value, OutcomeUnknown)


def test_a_connection_closed_before_the_answer_is_outcome_unknown(base_url: str) -> None:
    with pytest.raises(OutcomeUnknown, match=r"fake dropped the connection .*RemoteDisconnected"):
        post_json(f"{base_url}/hang-up", {}, headers={}, timeout=5, what="fake")


def test_an_answer_cut_short_is_outcome_unknown_not_a_success_with_half_a_body(base_url: str) -> None:
    with pytest.raises(OutcomeUnknown, match=r"IncompleteRead\(10 bytes read, 90 more expected\)"):
        post_json(f"{base_url}/truncated", {}, headers={}, timeout=5, what="fake")


def test_a_keyed_call_answered_502_is_outcome_unknown(base_url: str) -> None:
    api = KeyedApi(base_url, timeout_seconds=5, what="partner")
    response = api.post("/bad-gateway", {}, idempotency_key="op-1:payment")
    with pytest.raises(OutcomeUnknown, match="partner answered HTTP 502"):
        api.answer(response, idempotency_key="op-1:payment", not_done="Nothing was charged.")


def test_webhook_client_sends_the_key_and_raises_the_kernel_error_for_anything_but_2xx(base_url: str) -> None:
    hook = WebhookClient(f"{base_url}/ok", timeout_seconds=5, what="test webhook")
    assert hook.send({"a": 1}, idempotency_key="evt-1") == {"status": 200}
    with pytest.raises(BusinessRejection, match="test webhook answered a redirect"):
        WebhookClient(f"{base_url}/redirect", timeout_seconds=5, what="test webhook").send(
            {}, idempotency_key="evt-2"
        )
    with pytest.raises(TransientError):
        WebhookClient(f"{base_url}/busy", timeout_seconds=5, what="test webhook").send(
            {}, idempotency_key="evt-3"
        )
