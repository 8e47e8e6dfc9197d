from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_account_endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    # botocore would address DynamoDB by account (<account>.ddb...), which moto does not route.
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
