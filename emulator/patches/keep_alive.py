"""HTTP/1.1 connections kept open by moto's server (patch 8).

moto's behaviour: moto's server runs on werkzeug's development server, whose request handler
(``WSGIRequestHandler.run_wsgi`` in werkzeug/serving.py, 3.1.9; moto's ``MotoRequestHandler`` in
moto/moto_server/werkzeug_app.py subclasses it) answers every request with ``Connection: close``,
because http.server cannot drain an unread request body before the next request line. Every AWS call
then costs a new TCP connection on both sides and a new server thread: the sandbox's clients opened ~70
connections a second. After each response it also reads whatever the client sent next, to discard an
unread body.

AWS's behaviour: performance only: AWS's behaviour is unchanged. Every request gets the same answer;
only the connection outlives it, as AWS's endpoints' do. The handler reads each request's body up front
(it is bounded by Content-Length), so the next request line is always where the stream stands, and keeps
HTTP/1.1 connections open; a chunked upload, or a client that asks for it (``Connection: close``), still
closes. On a kept-alive connection the post-response drain is skipped (it would swallow the next
request). An idle connection is closed after two minutes; responses go out with TCP_NODELAY.

Upstream: no. werkzeug's development server is not meant to keep connections alive, and its drain
depends on closing; the change moto would want is a production WSGI server under ``moto_server``, not
this handler.

Patches: werkzeug 3.1.9 (``werkzeug.serving``'s request handler and its ``selectors``) and moto 5.2.5
(``MotoRequestHandler``, and ``moto.server.MotoRequestHandler`` that ``moto.server.main`` serves with).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

PATCHES = {"moto": "5.2.5", "werkzeug": "3.1.9"}

_KEEP_ALIVE = threading.local()


class _SelectorsWithoutDrain:
    """``werkzeug.serving``'s ``selectors`` (used only for the post-response drain): on a kept-alive
    connection the drain's selector reports nothing to read."""

    def __getattr__(self, name: str) -> Any:
        import selectors

        return getattr(selectors, name)

    @staticmethod
    def DefaultSelector() -> Any:
        import selectors

        selector = selectors.DefaultSelector()
        if getattr(_KEEP_ALIVE, "on", False):
            selector.select = lambda timeout=None: []  # type: ignore[method-assign]
        return selector


def request_handler() -> type:
    """moto's request handler, keeping HTTP/1.1 connections open (installs the drain's selectors)."""
    import io

    import werkzeug.serving
    from moto.moto_server.werkzeug_app import MotoRequestHandler

    werkzeug.serving.selectors = _SelectorsWithoutDrain()  # type: ignore[attr-defined,assignment]

    class KeepAliveRequestHandler(MotoRequestHandler):
        """Whether the current request's connection stays open is ``_KEEP_ALIVE.on``: one flag per
        server thread, read here and by the drain's selector."""

        timeout = 120  # seconds an idle connection may hold its server thread

        def setup(self) -> None:
            super().setup()
            # Headers and body go out in two writes: with Nagle's algorithm the second waits for
            # the client's delayed ACK of the first (40 ms) on a kept-alive connection.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def handle_one_request(self) -> None:
            _KEEP_ALIVE.on = False
            super().handle_one_request()

        def make_environ(self) -> dict[str, Any]:
            environ = super().make_environ()
            if environ.get("wsgi.input_terminated"):  # chunked request body: close afterwards
                return environ
            try:
                size = int(environ.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return environ
            environ["wsgi.input"] = io.BytesIO(self.rfile.read(size) if size > 0 else b"")
            _KEEP_ALIVE.on = not self.close_connection  # HTTP/1.1, not asked to close
            return environ

        def send_header(self, keyword: str, value: str) -> None:
            if _KEEP_ALIVE.on and keyword.lower() == "connection" and value.lower() == "close":
                return
            super().send_header(keyword, value)

    return KeepAliveRequestHandler


def install() -> Callable[[], None]:
    """Install patch 8 for ``moto.server.main``; returns a function that removes it."""
    import moto.server
    import werkzeug.serving

    saved = (werkzeug.serving.selectors, moto.server.MotoRequestHandler)  # type: ignore[attr-defined]
    moto.server.MotoRequestHandler = request_handler()  # type: ignore[attr-defined,assignment]

    def remove() -> None:
        werkzeug.serving.selectors, moto.server.MotoRequestHandler = saved  # type: ignore[attr-defined]

    return remove
