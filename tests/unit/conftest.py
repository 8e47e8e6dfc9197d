"""Unit tests are socket-free: any attempt to open a network connection fails the test loudly."""

import socket
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError(
            "unit tests must not open sockets; use a fake client or move the test to tests/handlers"
        )

    monkeypatch.setattr(socket.socket, "connect", refuse)
    yield
