"""A moto server in the test's own process, with some of the emulator's wrappers around it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from moto.server import ThreadedMotoServer

from emulator.server import free_port


@contextmanager
def moto_server(*installs: Callable[[], Callable[[], None]]) -> Iterator[str]:
    """Its endpoint, with each ``install`` applied in order (the last outermost, as ``emulator.server``
    installs them) and removed in reverse afterwards."""
    removes = [install() for install in installs]
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
        for remove in reversed(removes):
            remove()
