"""The scores authorizer's API key, read through Powertools' SecretsProvider: what is cached, what is
re-read, and what Secrets Manager is asked (socket-free: a fake client, or botocore's Stubber)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:scores-api-key-AbCdEf"
KEY = "k3y-" + "x" * 44


class FakeSecrets:
    """Answers GetSecretValue with ``response`` (or raises ``error``), recording every call."""

    def __init__(self, response: dict[str, Any]) -> None:
        self.response = response
        self.error: Exception | None = None
        self.calls: list[dict[str, Any]] = []

    def get_secret_value(self, **params: Any) -> dict[str, Any]:
        self.calls.append(params)
        if self.error is not None:
            raise self.error
        return {"ARN": SECRET_ARN, "Name": "scores-api-key", **self.response}


def api_key(secrets: Any, now: list[float]) -> Any:
    from scores.handlers.authorizer import ApiKey

    return ApiKey(SECRET_ARN, secrets_client=secrets, refresh_seconds=60, clock=lambda: now[0])


def throttled() -> ClientError:
    error = {"Code": "ThrottlingException", "Message": "Rate exceeded"}
    return ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}, "GetSecretValue")


@pytest.mark.parametrize("response", [{"SecretString": "  "}, {"SecretString": ""}, {"SecretBinary": b"k"}])
def test_a_secret_without_a_text_key_is_an_error_naming_the_secret_and_is_not_cached(
    response: dict[str, Any],
) -> None:
    from scores.handlers.authorizer import ApiKeySecretError

    secrets = FakeSecrets(response)
    key = api_key(secrets, [1000.0])

    with pytest.raises(ApiKeySecretError, match=rf"{SECRET_ARN}.*no SecretString"):
        key.matches(KEY)
    secrets.response = {"SecretString": KEY}  # the operator fixes the secret

    assert key.matches(KEY) is True  # read again at once: the bad value was never cached
    assert key.fetches == 2


def test_the_key_is_stripped_of_surrounding_whitespace() -> None:
    key = api_key(FakeSecrets({"SecretString": f" {KEY}\n"}), [1000.0])

    assert key.matches(KEY) is True


def test_a_failed_refresh_keeps_the_key_already_read_and_waits_a_refresh_period() -> None:
    now = [1000.0]
    secrets = FakeSecrets({"SecretString": KEY})
    key = api_key(secrets, now)
    assert key.matches(KEY) is True

    secrets.error = throttled()
    now[0] += 61
    refreshed = key.matches("rotated")  # a mismatch re-reads; Secrets Manager fails
    still_accepted = key.matches(KEY)
    now[0] += 30
    within_the_period = key.matches("rotated")

    assert refreshed is False
    assert still_accepted is True
    assert within_the_period is False
    assert key.fetches == 2  # the failed re-read counts as a read and starts a new period


def test_a_secret_that_cannot_be_read_first_time_raises_naming_the_secret() -> None:
    from scores.handlers.authorizer import ApiKeySecretError

    secrets = FakeSecrets({"SecretString": KEY})
    secrets.error = throttled()

    with pytest.raises(ApiKeySecretError, match=rf"{SECRET_ARN}.*ThrottlingException"):
        api_key(secrets, [1000.0]).matches(KEY)


def test_only_get_secret_value_on_the_secret_is_called() -> None:
    # The authorizer's role is granted secretsmanager:GetSecretValue on this one secret. The Stubber
    # fails on any other operation, on other parameters, and on more calls than stubbed.
    client = boto3.client("secretsmanager", region_name="us-east-1")
    now = [1000.0]
    with Stubber(client) as stubber:
        for value in (KEY, "rotated"):
            stubber.add_response(
                "get_secret_value",
                {"ARN": SECRET_ARN, "Name": "scores-api-key", "SecretString": value},
                {"SecretId": SECRET_ARN},
            )
        key = api_key(client, now)
        assert key.matches(KEY) is True
        now[0] += 61
        assert key.matches("rotated") is True  # the forced re-read (Powertools' force_fetch)
        stubber.assert_no_pending_responses()
