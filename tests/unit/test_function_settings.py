"""One declaration of a function's settings for the stack and the function (relay.settings), and
the wiring built from it once per process (relay.wiring)."""

from __future__ import annotations

from typing import ClassVar

import pytest
from pydantic import Field

from relay.settings import FunctionEnvironment, FunctionSettings, SettingsError
from relay.wiring import Wired, on_reset, reset_all


class Settings(FunctionSettings):
    SERVICE: ClassVar[str] = "widgets"

    widgets_table: str | None = None
    queue_url: str | None = None
    timeout_seconds: float = Field(5.0, gt=0)


WORKER = FunctionEnvironment(
    Settings, "worker", required=("widgets_table", "queue_url"), optional=("timeout_seconds",)
)


def test_the_stack_gets_the_variables_named_after_the_fields() -> None:
    env = WORKER.environment(widgets_table="${Token[TOKEN.1]}", queue_url="https://q", timeout_seconds=2)

    assert env == {"WIDGETS_TABLE": "${Token[TOKEN.1]}", "QUEUE_URL": "https://q", "TIMEOUT_SECONDS": "2"}


def test_synth_fails_on_a_missing_unknown_or_invalid_setting() -> None:
    with pytest.raises(SettingsError, match="missing required settings: queue_url"):
        WORKER.environment(widgets_table="t")
    with pytest.raises(SettingsError, match="not one of its settings: colour"):
        WORKER.environment(widgets_table="t", queue_url="q", colour="red")
    with pytest.raises(SettingsError, match="TIMEOUT_SECONDS"):
        WORKER.environment(widgets_table="t", queue_url="q", timeout_seconds=-1)


def test_a_declaration_naming_a_field_the_model_lacks_is_refused() -> None:
    with pytest.raises(SettingsError, match="colour are not widgets settings"):
        FunctionEnvironment(Settings, "odd", required=("colour",))


def test_cold_start_names_every_missing_variable_at_once() -> None:
    with pytest.raises(SettingsError) as raised:
        WORKER.load({"TIMEOUT_SECONDS": "3"})

    message = str(raised.value)
    assert "the widgets worker function cannot start" in message
    assert "WIDGETS_TABLE" in message and "QUEUE_URL" in message


def test_cold_start_rejects_an_invalid_value_by_its_variable() -> None:
    with pytest.raises(SettingsError, match="TIMEOUT_SECONDS"):
        WORKER.load({"WIDGETS_TABLE": "t", "QUEUE_URL": "q", "TIMEOUT_SECONDS": "soon"})


def test_wiring_is_built_once_checked_per_function_and_forgotten_by_reset_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    builds: list[int] = []
    hooks: list[str] = []
    wired = Wired(lambda: builds.append(1) or len(builds))
    on_reset(lambda: hooks.append("reset"))
    worker = wired.checked(WORKER)

    monkeypatch.delenv("WIDGETS_TABLE", raising=False)
    monkeypatch.delenv("QUEUE_URL", raising=False)
    with pytest.raises(SettingsError):
        worker()
    assert builds == []  # nothing was built for a function that cannot start

    monkeypatch.setenv("WIDGETS_TABLE", "t")
    monkeypatch.setenv("QUEUE_URL", "q")
    assert worker() == 1 and worker() == 1 and wired() == 1

    reset_all()
    assert worker() == 2 and "reset" in hooks


def test_a_required_setting_without_a_value_fails_synth_and_an_unset_optional_is_left_out() -> None:
    with pytest.raises(SettingsError, match="missing required settings: queue_url, widgets_table"):
        WORKER.environment(widgets_table=None, queue_url="")

    assert WORKER.environment(widgets_table="t", queue_url="q", timeout_seconds=None) == {
        "WIDGETS_TABLE": "t",
        "QUEUE_URL": "q",
    }


def test_a_queue_handler_without_its_dlq_refuses_to_consume(monkeypatch: pytest.MonkeyPatch) -> None:
    from relay.consumer import queue_handler
    from tests.builders import FakeContext

    class NoAws:
        sqs = None  # never reached: the check comes first

    handled: list[object] = []
    handler = queue_handler(lambda: NoAws(), lambda _w, envelope, _ctx: handled.append(envelope))  # type: ignore[arg-type, type-var]
    monkeypatch.delenv("RELAY_DLQ_URL", raising=False)

    with pytest.raises(SettingsError, match="RELAY_DLQ_URL is not set"):
        handler({"Records": []}, FakeContext())
    assert handled == []
