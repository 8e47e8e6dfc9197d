"""Request routing without per-request directory listings and regex scans; no access log (patch 4).

moto's behaviour: for every request moto's dispatcher, ``DomainDispatcherApplication.get_backend_for_host``
(moto/moto_server/werkzeug_app.py), lists moto's package directory (``list_of_moto_modules`` in
moto/backends.py) and tries a few hundred URL regexes, under one lock, to find the service; the response
class then rebuilds the list of its own methods with ``inspect.getmembers``
(``method_names_from_class`` in moto/core/utils.py, called from moto/core/responses.py) to look the action
up; and werkzeug writes an access-log line. Profiled with py-spy during ``make demo``: about a fifth of
the server's CPU.

AWS's behaviour: performance only: AWS's behaviour is unchanged. Every request reaches the same service
and action as before: the host -> service answer is cached (the mapping never changes in a run), the
package listing is taken once, a response class's method names are cached per class; the access log is
off, and werkzeug's warnings and errors still reach the log.

Upstream: yes. The caches: the directory listing and the method list are recomputed per request for
answers that cannot change while the process runs, and caching them is a few lines. Not the access log,
which is the emulator's choice. ``docs/upstream/routing.md``.

Patches: moto 5.2.5, ``moto.backends.list_of_moto_modules``,
``DomainDispatcherApplication.get_backend_for_host`` and ``moto.core.responses.method_names_from_class``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PATCHES = {"moto": "5.2.5"}


def install() -> Callable[[], None]:
    """Install patch 4; returns a function that removes it."""
    import logging

    from moto import backends
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    original_modules = backends.list_of_moto_modules
    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules
    original = DomainDispatcherApplication.get_backend_for_host
    cache: dict[str | None, Any] = {}

    def get_backend_for_host(self: Any, host: str | None) -> Any:
        if host not in cache:
            cache[host] = original(self, host)
        return cache[host]

    DomainDispatcherApplication.get_backend_for_host = get_backend_for_host  # type: ignore[method-assign]
    import functools

    import moto.core.responses
    from moto.core.utils import method_names_from_class as listed

    original_names = moto.core.responses.method_names_from_class  # type: ignore[attr-defined]

    @functools.cache
    def method_names_from_class(clazz: type) -> frozenset[str]:
        return frozenset(listed(clazz))

    moto.core.responses.method_names_from_class = method_names_from_class  # type: ignore[attr-defined,assignment]
    werkzeug_log = logging.getLogger("werkzeug")
    level = werkzeug_log.level
    werkzeug_log.setLevel(logging.WARNING)

    def remove() -> None:
        backends.list_of_moto_modules = original_modules
        DomainDispatcherApplication.get_backend_for_host = original  # type: ignore[method-assign]
        moto.core.responses.method_names_from_class = original_names  # type: ignore[attr-defined]
        werkzeug_log.setLevel(level)

    return remove
