"""The sandbox's HTTP API over real HTTP on 127.0.0.1, with a stub runtime that echoes the event it is
given: any method is routed (404, never 501), bodies are encoded as API Gateway encodes them, path
parameters arrive decoded, and requests it cannot read are answered, never dropped."""

from __future__ import annotations

import base64
import http.client
import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from emulator.http_api import MAX_REQUEST_BYTES, HttpApi
from emulator.provision import HttpApiSpec, RouteSpec
from emulator.runtime import InvokeResult


class EchoRuntime:
    """Answers every invocation with the event it was given."""

    def invoke(self, function: str, event: dict[str, Any]) -> InvokeResult:
        return InvokeResult(True, payload={"statusCode": 200, "body": json.dumps(event)})


@pytest.fixture(scope="module")
def api() -> Iterator[HttpApi]:
    spec = HttpApiSpec(
        name="echo",
        api_id="echo",
        routes=[
            RouteSpec("POST /things", "fn", "NONE", "2.0"),
            RouteSpec("GET /things/{thingId}", "fn", "NONE", "2.0"),
        ],
    )
    served = HttpApi(spec, EchoRuntime(), 0)  # type: ignore[arg-type]
    served.start()
    yield served
    served.close()


def test_port_zero_is_the_port_bound_when_the_api_starts(api: HttpApi) -> None:
    # A port picked before the stage provisioned could be taken by another stage by the time it binds.
    assert api.port != 0 and api.base_url == f"http://127.0.0.1:{api.port}"
    status, _, _ = request(api, "GET", "/things/1")
    assert status == 200


def request(
    api: HttpApi, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", api.port, timeout=10)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def event_of(api: HttpApi, body: bytes, content_type: str | None) -> dict[str, Any]:
    headers = {"content-type": content_type} if content_type is not None else {}
    status, _, data = request(api, "POST", "/things", body, headers)
    assert status == 200
    event: dict[str, Any] = json.loads(data)
    return event


@pytest.mark.parametrize(
    "method", ["FOO", "PROPFIND", "TRACE", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT"]
)
def test_a_method_no_route_has_is_404_not_found_like_api_gateway_never_501(api: HttpApi, method: str) -> None:
    status, headers, data = request(api, method, "/things")

    assert (status, data) == (404, b'{"message":"Not Found"}')
    assert headers["content-type"] == "application/json"


def test_a_head_answer_has_no_body_and_the_connection_still_serves_the_next_request(api: HttpApi) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", api.port, timeout=10)
    try:
        connection.request("HEAD", "/things/1")
        head = connection.getresponse()
        assert head.status == 404 and head.read() == b""
        connection.request("GET", "/things/1")
        assert connection.getresponse().status == 200
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("content_type", "text"),
    [
        ("application/json", True),
        ("Application/JSON; charset=utf-8", True),
        ("text/plain", True),
        ("application/xml", True),
        ("application/octet-stream", False),
        ("application/x-www-form-urlencoded", False),
        ("application/octet-stream; charset=utf-8", False),
        (None, False),
    ],
)
def test_a_body_is_text_only_for_the_media_types_api_gateway_treats_as_text(
    api: HttpApi, content_type: str | None, text: bool
) -> None:
    event = event_of(api, b'{"a": 1}', content_type)

    assert event["isBase64Encoded"] is not text
    assert (event["body"] if text else base64.b64decode(event["body"])) in ('{"a": 1}', b'{"a": 1}')


def test_a_text_body_that_is_not_utf8_is_delivered_as_its_bytes_base64_encoded(api: HttpApi) -> None:
    event = event_of(api, b'{"a": "\xff"}', "application/json")

    assert event["isBase64Encoded"] is True
    assert base64.b64decode(event["body"]) == b'{"a": "\xff"}'


def test_path_parameters_arrive_url_decoded(api: HttpApi) -> None:
    status, _, data = request(api, "GET", "/things/a%20b%2Fc%C3%A9")

    assert status == 200
    event = json.loads(data)
    assert event["pathParameters"] == {"thingId": "a b/cé"}
    assert event["rawPath"] == "/things/a%20b%2Fc%C3%A9"


def test_a_chunked_body_is_read_whole(api: HttpApi) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", api.port, timeout=10)
    try:
        chunks = iter([b'{"a": ', b"1}"])
        connection.request("POST", "/things", body=chunks, headers={"content-type": "application/json"})
        response = connection.getresponse()
        assert response.status == 200
        assert json.loads(response.read())["body"] == '{"a": 1}'
    finally:
        connection.close()


def raw_exchange(api: HttpApi, head: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", api.port), timeout=10) as sock:
        sock.sendall(head)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_a_malformed_content_length_is_400_not_a_dropped_connection(api: HttpApi) -> None:
    answer = raw_exchange(api, b"POST /things HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n")

    assert answer.startswith(b"HTTP/1.1 400")
    assert answer.endswith(b'{"message":"Bad Request"}')


def test_a_body_over_the_10_mb_quota_is_413_without_reading_it(api: HttpApi) -> None:
    head = f"POST /things HTTP/1.1\r\nHost: x\r\nContent-Length: {MAX_REQUEST_BYTES + 1}\r\n\r\n".encode()

    answer = raw_exchange(api, head)

    assert answer.startswith(b"HTTP/1.1 413")
    assert b"connection: close" in answer.lower()


def test_an_event_over_lambdas_6_mb_invocation_payload_is_413(api: HttpApi) -> None:
    status, _, data = request(
        api, "POST", "/things", b"x" * (7 * 1024 * 1024), {"content-type": "text/plain"}
    )

    assert (status, data) == (413, b'{"message":"Request Too Long"}')


def test_a_client_still_sending_a_body_over_the_quota_reads_the_413(api: HttpApi) -> None:
    status, _, data = request(
        api, "POST", "/things", b" " * (MAX_REQUEST_BYTES + 1), {"content-type": "text/plain"}
    )

    assert (status, data) == (413, f"HTTP content length exceeded {MAX_REQUEST_BYTES} bytes.".encode())
