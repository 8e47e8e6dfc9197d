"""What a function is wired with, built once per execution environment and forgotten together.

A service's ``wiring.py`` holds one class with its settings, its lazily created AWS clients
(``relay.clients.AwsClients``) and the stores and HTTP clients its functions use; each handler gets it
through ``Wired.checked(ENVIRONMENT)``, which at the first invocation (the cold start) checks that
function's settings (``relay.settings.FunctionEnvironment``) and names every missing variable.
Nothing is built at import: importing a handler stays cheap, and tests can set the environment and
start ``mock_aws`` first. Tests call ``reset_all()`` after changing either.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

from relay.clients import AwsClients, forget_default_clients
from relay.settings import FunctionEnvironment
from relay.steps import Clock, utc_now

_ALL: weakref.WeakSet[Wired[Any]] = weakref.WeakSet()
_RESET_HOOKS: list[Callable[[], None]] = []


class ServiceWiring[S](AwsClients):
    """The base of a service's ``Wiring``: its settings, its lazily created AWS clients, and the clock
    its steps read the time from, once at their entry (a test replaces ``relay.wiring.utc_now``)."""

    def __init__(self, settings: S) -> None:
        self.settings = settings

    @property
    def clock(self) -> Clock:
        return utc_now


class Wired[W]:
    """A lazily built, per-process value (a service's wiring)."""

    def __init__(self, build: Callable[[], W]) -> None:
        self._build = build
        self._value: W | None = None
        self._checked: set[str] = set()
        self._lock = threading.Lock()
        _ALL.add(self)

    def __call__(self) -> W:
        value = self._value
        if value is None:
            with self._lock:
                if self._value is None:
                    self._value = self._build()
                value = self._value
        return value

    def checked(self, environment: FunctionEnvironment[Any]) -> Callable[[], W]:
        """The accessor a handler uses: the first call checks ``environment`` (cold start)."""

        def get() -> W:
            if environment.function not in self._checked:
                environment.load()
                self._checked.add(environment.function)
            return self()

        return get

    def reset(self) -> None:
        with self._lock:
            self._value = None
            self._checked.clear()


def on_reset(hook: Callable[[], None]) -> None:
    """Run ``hook`` on every ``reset_all()`` (a module-level cache outside a wiring)."""
    _RESET_HOOKS.append(hook)


def reset_all() -> None:
    """Forget every wiring and cache (tests: after changing the environment or starting a new mock)."""
    for wired in list(_ALL):
        wired.reset()
    for hook in _RESET_HOOKS:
        hook()
    forget_default_clients()
