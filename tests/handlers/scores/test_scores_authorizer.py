"""The API-key authorizer of POST /score-snapshots (HTTP API, payload 2.0, simple responses)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import FakeContext
from tests.handlers.scores.world import API_KEY, ScoresWorld, authorizer_event


def authorize(api_key: str | None) -> dict[str, Any]:
    from scores.handlers import authorizer

    result: dict[str, Any] = authorizer.handler(authorizer_event(api_key), FakeContext())  # type: ignore[arg-type]
    return result


def test_the_right_key_is_authorized(world: ScoresWorld) -> None:
    assert authorize(API_KEY) == {"isAuthorized": True}


@pytest.mark.parametrize("key", ["wrong", API_KEY[:-1], API_KEY + "x", API_KEY.upper(), ""])
def test_a_wrong_key_is_not_authorized(world: ScoresWorld, key: str) -> None:
    assert authorize(key) == {"isAuthorized": False}


def test_a_request_without_the_header_is_not_authorized(world: ScoresWorld) -> None:
    assert authorize(None) == {"isAuthorized": False}


def test_the_secret_is_read_once_for_the_life_of_the_container(world: ScoresWorld) -> None:
    from scores.handlers import authorizer

    results = [authorize(API_KEY)["isAuthorized"] for _ in range(5)]
    results += [authorize("wrong")["isAuthorized"] for _ in range(5)]

    assert results == [True] * 5 + [False] * 5
    # The first wrong key may not refresh (read less than a minute ago); none of the others do.
    assert authorizer.api_key().fetches == 1


def test_a_rotated_key_is_accepted_after_a_refresh_at_most_once_a_minute(world: ScoresWorld) -> None:
    from scores.handlers.authorizer import ApiKey

    now = [1000.0]
    key = ApiKey(world.secret_arn, secrets_client=world.secrets, refresh_seconds=60, clock=lambda: now[0])
    assert key.matches(API_KEY)
    world.secrets.put_secret_value(SecretId=world.secret_arn, SecretString="rotated-key")

    now[0] += 30
    early = key.matches("rotated-key")  # read 30 s ago: not read again
    for _ in range(10):
        key.matches("spray")
    fetches_within_the_minute = key.fetches
    now[0] += 31
    late = key.matches("rotated-key")

    assert early is False
    assert fetches_within_the_minute == 1
    assert late is True
    assert key.fetches == 2
    assert key.matches(API_KEY) is False  # the old key is gone once the new one is read


def test_the_key_is_never_logged(
    world: ScoresWorld, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    with caplog.at_level("DEBUG"):
        authorize(API_KEY)
        authorize("wrong-key-value-123")

    # Our records only: botocore's own DEBUG wire log (off in Lambda) would show the secret response.
    ours = [r for r in caplog.records if not r.name.startswith(("botocore", "boto3", "urllib3"))]
    logged = repr([vars(r) for r in ours]) + "".join(capsys.readouterr())
    assert "wrong API key denied" in logged
    assert API_KEY not in logged
    assert "wrong-key-value-123" not in logged


def test_an_unreadable_secret_fails_the_authorizer_instead_of_denying(
    world: ScoresWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    from relay.wiring import reset_all

    monkeypatch.setenv("API_KEY_SECRET_ARN", world.secret_arn.replace("scores-api-key", "missing"))
    reset_all()

    # API Gateway answers 500 (retried by the API Destination), not a misleading 403.
    with pytest.raises(Exception, match=r"ResourceNotFound|can't find"):
        authorize(API_KEY)
