"""A pinned send keeps TLS on the host name: ``relay.http`` dials the vetted address, while SNI, the Host
header and the certificate check use the URL's name. A real TLS server on 127.0.0.1 stands in for the
receiver, with a certificate for ``hooks.relay.test`` (a name that resolves nowhere: only the pinned
address can reach it).

Here rather than in tests/unit: the server is a real socket on 127.0.0.1 (tests/unit is socket-free).
"""

from __future__ import annotations

import datetime as dt
import http.server
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from relay.errors import DependencyUnavailable
from relay.http import WebhookClient

HOST = "hooks.relay.test"


def _certificate(tmp: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for `name` (its own CA) and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / f"{name}.pem", tmp / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


class Receiver:
    def __init__(self, cert: Path, key: Path) -> None:
        self.requests: list[dict[str, Any]] = []
        self.sni: list[str | None] = []
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)

        def heard(_sock: Any, name: str | None, _ctx: Any) -> None:
            self.sni.append(name)

        context.sni_callback = heard
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                receiver.requests.append({"host": self.headers.get("Host"), "body": self.rfile.read(length)})
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def pinned_client(receiver: Receiver, tls: ssl.SSLContext) -> WebhookClient:
    """A client of https://HOST:<port>/notices that dials 127.0.0.1, as a vetted callback would."""
    return WebhookClient(
        f"https://{HOST}:{receiver.port}/notices",
        timeout_seconds=5,
        what="the callback",
        connect_to="127.0.0.1",
        tls=tls,
    )


@pytest.fixture
def trusted(tmp_path: Path) -> Iterator[tuple[Receiver, ssl.SSLContext]]:
    cert, key = _certificate(tmp_path, HOST)
    client_tls = ssl.create_default_context(cafile=str(cert))
    with Receiver(cert, key) as receiver:
        yield receiver, client_tls


def test_a_pinned_send_reaches_the_vetted_address_with_the_host_name_in_sni_host_and_certificate(
    trusted: tuple[Receiver, ssl.SSLContext],
) -> None:
    receiver, tls = trusted
    client = pinned_client(receiver, tls)

    assert client.send({"operationId": "op-1"}, idempotency_key="op-1:notice") == {"status": 204}
    assert receiver.sni == [HOST]
    assert receiver.requests == [{"host": f"{HOST}:{receiver.port}", "body": b'{"operationId":"op-1"}'}]


def test_a_certificate_for_another_name_is_refused_even_at_the_vetted_address(tmp_path: Path) -> None:
    # Pinning changes where the request goes, not whom it trusts: the server must still prove HOST.
    cert, key = _certificate(tmp_path, "someone-else.test")
    with Receiver(cert, key) as receiver:
        client = pinned_client(receiver, ssl.create_default_context(cafile=str(cert)))
        with pytest.raises(DependencyUnavailable, match=r"CERTIFICATE_VERIFY_FAILED|certificate"):
            client.send({"operationId": "op-1"}, idempotency_key="op-1:notice")
        assert receiver.requests == []
