"""A service backend looked up by account without moto's global lock (patch 9).

moto's behaviour: every lookup of a service backend by account, ``BackendDict.__getitem__``
(moto/core/base_backend.py), goes through ``_create_account_specific_backend``, which takes moto's one
global ``backend_lock`` and compares the backend against every registered one (~150,
``BackendDict._instances``), even when the account's backend has existed for hours. A request makes
several lookups (the service's own, IAM's "access key last used"); under load the server's threads
queued on that lock.

AWS's behaviour: performance only: AWS's behaviour is unchanged. The same backend object is returned:
a backend that exists and is registered is returned without the lock; the first lookup of an account
(which creates and registers its backend) still takes moto's path.

Upstream: yes. The check-then-create under a lock is only needed on the first lookup; testing for the
account before taking the lock (double-checked) removes a global serialization point from every request
of every moto server. ``docs/upstream/backend_lookup.md``.

Patches: moto 5.2.5, ``BackendDict.__getitem__``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PATCHES = {"moto": "5.2.5"}


def install() -> Callable[[], None]:
    """Install patch 9; returns a function that removes it."""
    from moto.core.base_backend import BackendDict

    original = BackendDict.__getitem__
    registered: set[int] = set()

    def __getitem__(self: Any, account_id: str) -> Any:
        if id(self) in registered and dict.__contains__(self, account_id):
            return dict.__getitem__(self, account_id)
        backend = original(self, account_id)  # creates and registers under moto's lock
        registered.add(id(self))
        return backend

    BackendDict.__getitem__ = __getitem__  # type: ignore[method-assign]

    def remove() -> None:
        BackendDict.__getitem__ = original  # type: ignore[method-assign]

    return remove
