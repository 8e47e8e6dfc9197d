"""Patch 8 (``emulator.patches.keep_alive``): HTTP/1.1 connections to moto's server, with werkzeug's
handler and with the patch's; and on the real emulator process, which installs every patch."""

from __future__ import annotations

import http.client
import threading
from typing import Any

from emulator.patches import keep_alive
from tests.sandbox.patches.support import installed

AUTH = (
    "AWS4-HMAC-SHA256 Credential=testing/20261201/us-east-1/{}/aws4_request, SignedHeaders=host, Signature=0"
)
LIST_TABLES = {
    "X-Amz-Target": "DynamoDB_20120810.ListTables",
    "Content-Type": "application/x-amz-json-1.0",
    "Authorization": AUTH.format("dynamodb"),
}


def _calls_on_one_connection(port: int) -> list[tuple[int, bool, bool]]:
    """Four requests, with bodies moto reads or not, then one asking to close: for each, the status,
    whether the server closes the connection, and whether it went over the first connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    s3 = {"Authorization": AUTH.format("s3"), "Host": f"127.0.0.1:{port}"}
    requests: list[tuple[str, str, bytes, dict[str, str]]] = [
        ("POST", "/", b"{}", LIST_TABLES),
        # A body moto answers without reading (no such bucket), then a normal request: the unread
        # body must not be taken for the next request line.
        ("PUT", "/no-such-bucket/key", b"x" * 70_000, s3),
        ("POST", "/", b"{}", LIST_TABLES),
        ("POST", "/", b"{}", LIST_TABLES),
        ("POST", "/", b"{}", {**LIST_TABLES, "Connection": "close"}),
    ]
    seen: list[tuple[int, bool, bool]] = []
    first: Any = None
    try:
        for method, path, body, headers in requests:
            conn.request(method, path, body=body, headers=headers)
            sock, first = conn.sock, first or conn.sock
            response = conn.getresponse()
            answer = response.read()
            assert response.status != 200 or b"TableNames" in answer
            seen.append((response.status, response.will_close, sock is first))
    finally:
        conn.close()
    return seen


def _served_by(handler: type) -> list[tuple[int, bool, bool]]:
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    server = make_server(
        "127.0.0.1",
        0,
        DomainDispatcherApplication(create_backend_app),
        threaded=True,
        request_handler=handler,
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        return _calls_on_one_connection(server.port)
    finally:
        server.shutdown()
        thread.join(5)


def test_connections_stay_open_and_request_bodies_never_leak_into_the_next_request() -> None:
    """werkzeug's handler closes the connection after every response; the patch's keeps it open for
    the next request, whether moto read the body or not, and still honours ``Connection: close``."""
    import moto.server
    from moto.moto_server.werkzeug_app import MotoRequestHandler

    assert _served_by(MotoRequestHandler) == [
        (200, True, True),
        (404, True, False),
        (200, True, False),
        (200, True, False),
        (200, True, False),
    ]
    with installed(keep_alive.install):
        handler = moto.server.MotoRequestHandler  # type: ignore[attr-defined]
        assert handler is not MotoRequestHandler
        assert _served_by(handler) == [
            (200, False, True),
            (404, False, True),
            (200, False, True),
            (200, False, True),
            (200, True, True),
        ]


def test_the_emulator_process_keeps_connections_open() -> None:
    """The same, on the real emulator (``install_for_server``, every patch)."""
    from emulator.server import Emulator, free_port

    emulator = Emulator(free_port())
    emulator.start()
    try:
        assert [closes for _, closes, _ in _calls_on_one_connection(emulator.port)] == [False] * 4 + [True]
    finally:
        emulator.stop()
