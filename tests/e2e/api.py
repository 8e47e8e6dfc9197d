"""The e2e tests' client of the app's HTTP API: every request SigV4-signed (``execute-api``) as the sandbox's
allowed caller, ``relay-local-client`` (``Sandbox.client_auth()``), as a client of the AWS_IAM routes signs
on AWS. Only tests about the signature itself (test_callers_e2e) and the API-key route
``POST /score-snapshots`` (test_agents_e2e) call ``requests`` directly."""

from __future__ import annotations

from typing import Any

import requests

from local.sandbox import Sandbox


def call(sb: Sandbox, method: str, path: str, **kwargs: Any) -> requests.Response:
    """``method`` ``sb.api_url + path``, signed as the sandbox's client (``timeout`` 30 s unless given)."""
    return sb.call(method, path, **kwargs)


def get(sb: Sandbox, path: str, **kwargs: Any) -> requests.Response:
    return call(sb, "GET", path, **kwargs)


def post(sb: Sandbox, path: str, **kwargs: Any) -> requests.Response:
    return call(sb, "POST", path, **kwargs)
