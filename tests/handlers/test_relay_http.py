"""relay.http against a real HTTP server on 127.0.0.1: statuses returned, redirects not followed,
timeouts and refused connections turned into DependencyUnavailable (transient)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from relay.errors import BusinessRejection, DependencyUnavailable, TransientError
from relay.http import WebhookClient, post_json


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
    with pytest.raises(DependencyUnavailable, match=r"fake did not answer within 0.2 s"):
        post_json(f"{base_url}/slow", {}, headers={}, timeout=0.2, what="fake")


def test_a_refused_connection_is_transient() -> None:
    with pytest.raises(TransientError, match="unreachable"):
        post_json("http://127.0.0.1:9/x", {}, headers={}, timeout=2, what="nobody")


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
