"""Patch 4 (``emulator.patches.routing``): each request's routing work, with and without it, and the
same service and action found."""

from __future__ import annotations

import inspect
import logging
import os
from typing import Any

import pytest

from emulator.patches import routing
from tests.sandbox.patches.support import installed

HOSTS = [
    "dynamodb.us-east-1.amazonaws.com",
    "sqs.eu-west-1.amazonaws.com",
    "sns",
    "events.us-east-1.amazonaws.com",
]


def _route(monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], int, frozenset[str], int]:
    """Each host looked up three times, and DynamoDB's action names twice: the answers, the moto
    package listings made, the action names, and the ``inspect.getmembers`` passes made."""
    import moto.core.responses
    from moto.dynamodb.responses import DynamoHandler
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    listings, passes = [0], [0]
    listdir, getmembers = os.listdir, inspect.getmembers

    def counted_listdir(path: Any) -> Any:
        listings[0] += 1
        return listdir(path)

    def counted_getmembers(*args: Any, **kwargs: Any) -> Any:
        passes[0] += 1
        return getmembers(*args, **kwargs)

    with monkeypatch.context() as counting:
        counting.setattr(os, "listdir", counted_listdir)
        counting.setattr(inspect, "getmembers", counted_getmembers)
        app = DomainDispatcherApplication(create_backend_app)
        backends = [app.get_backend_for_host(host) for host in HOSTS * 3]
        names = [moto.core.responses.method_names_from_class(DynamoHandler) for _ in range(2)]
    assert set(names[0]) == set(names[1])
    return backends, listings[0], frozenset(names[0]), passes[0]


def test_routing_lists_no_directory_and_rebuilds_no_method_list_per_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """moto lists its package directory for each lookup of a host and rebuilds a handler's method
    list for each request; with the patch neither happens again, and every answer is the same."""
    motos_backends, motos_listings, motos_names, motos_passes = _route(monkeypatch)
    assert motos_backends == ["dynamodb", "sqs", "sns", "events"] * 3
    assert (motos_listings, motos_passes) == (len(HOSTS) * 3, 2)

    with installed(routing.install):
        backends, listings, names, passes = _route(monkeypatch)
        assert logging.getLogger("werkzeug").level == logging.WARNING  # no access log
    assert (backends, names) == (motos_backends, motos_names)
    assert (listings, passes) == (0, 1)  # the listing was taken at install; the method list once
