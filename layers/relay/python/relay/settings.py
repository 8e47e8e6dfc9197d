"""A function's configuration: ONE declaration that both the stack and the function read.

A service's ``settings.py`` declares its settings model (``FunctionSettings``: a field per setting,
its environment variable the field's name in upper case) and, per function, a
``FunctionEnvironment`` naming the settings that function needs::

    class Settings(FunctionSettings):
        SERVICE: ClassVar[str] = "orders"
        orders_table: str | None = None          # ORDERS_TABLE
        http_timeout_seconds: float = 5.0        # HTTP_TIMEOUT_SECONDS

    INVENTORY = FunctionEnvironment(Settings, "inventory", required=("orders_table",))

The stack builds the function's environment from it (``INVENTORY.environment(orders_table=...)``:
synth fails on a missing, unknown or invalid setting), and the function checks it at cold start
(``INVENTORY.load()``: every missing or invalid variable named at once), so a variable name is
written once, in the field, and a function cannot start half-configured.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError


class SettingsError(RuntimeError):
    """The function's environment is incomplete or invalid: a deployment problem, not a message problem."""


class FunctionSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    SERVICE: ClassVar[str] = "relay"
    """The service (and stack) name used in error messages."""

    @staticmethod
    def env_name(field: str) -> str:
        """The environment variable of a field: its name in upper case."""
        return field.upper()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field in cls.model_fields:
            raw = env.get(cls.env_name(field))
            if raw is not None and raw.strip() != "":
                values[field] = raw.strip()
        return cls._validated(values, what=f"invalid {cls.SERVICE} configuration")

    @classmethod
    def _validated(cls, values: Mapping[str, Any], *, what: str) -> Self:
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problems = "; ".join(
                f"{cls.env_name(str(err['loc'][0])) if err['loc'] else '?'}: {err['msg']}"
                for err in exc.errors()
            )
            raise SettingsError(f"{what}: {problems}") from None

    def require(self, field: str) -> str:
        """The value of an optional setting this function cannot work without."""
        value = getattr(self, field)
        if not value:
            raise SettingsError(
                f"environment variable {self.env_name(field)} is not set; this function needs it "
                f"(the {self.SERVICE} stack sets it -- check the function's configuration)."
            )
        return str(value)


class ServiceSettings(FunctionSettings):
    """A Relay service's settings: its fields, plus the kernel's own table every service has."""

    idempotency_table: str | None = None
    """IDEMPOTENCY_TABLE: processed-event markers (``relay.idempotency``), client Idempotency-Keys
    (``relay.request_keys``) and Powertools idempotency records (``relay.side_effects``)."""


class OutboxSettings(ServiceSettings):
    """A service with a transactional outbox (``relay.outbox``): the topic its publisher sends to."""

    events_topic_arn: str | None = None
    """EVENTS_TOPIC_ARN: the SNS topic the outbox publisher publishes the table's outbox rows to."""


def http_url(value: str | None, *, example: str, strip_slash: bool = True) -> str | None:
    """Validator body for a configured http(s) URL (https on AWS: the stage config enforces that)."""
    if value is None:
        return None
    if not value.startswith(("https://", "http://")):
        raise ValueError(f"must be an http(s) URL, e.g. {example}")
    return value.rstrip("/") if strip_slash else value


@dataclass(frozen=True)
class FunctionEnvironment[S: FunctionSettings]:
    """The settings one function needs: ``required`` must be set, ``optional`` may be (their
    defaults live in the model). The stack and the function both read this one declaration."""

    settings: type[S]
    function: str
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = [f for f in (*self.required, *self.optional) if f not in self.settings.model_fields]
        if unknown:
            raise SettingsError(
                f"{self.label}: {', '.join(unknown)} are not {self.settings.SERVICE} settings"
            )

    @property
    def label(self) -> str:
        return f"the {self.settings.SERVICE} {self.function} function"

    def environment(self, **values: object) -> dict[str, str]:
        """The Lambda environment (for the stack): every required setting and any optional one, by
        field name. Values the deployment resolves later (CDK tokens) are passed through unchecked."""
        unknown = sorted(set(values) - {*self.required, *self.optional})
        missing = sorted(f for f in self.required if values.get(f) in (None, ""))
        if unknown or missing:
            raise SettingsError(
                f"{self.label}: "
                + "; ".join(
                    part
                    for part in (
                        f"not one of its settings: {', '.join(unknown)}" if unknown else "",
                        f"missing required settings: {', '.join(missing)}" if missing else "",
                    )
                    if part
                )
            )
        # Unset optionals take the model's default; values the deployment resolves (tokens) pass unchecked.
        known = {
            k: v
            for k, v in values.items()
            if v not in (None, "") and not (isinstance(v, str) and "${Token[" in v)
        }
        self.settings._validated(known, what=f"invalid settings for {self.label}")
        return {self.settings.env_name(f): str(v) for f, v in values.items() if v is not None and v != ""}

    def load(self, environ: Mapping[str, str] | None = None) -> S:
        """The function's settings, checked at cold start: every required variable set, every value
        valid -- all problems named by variable in one error."""
        settings = self.settings.from_env(environ)
        missing = [self.settings.env_name(f) for f in self.required if getattr(settings, f) in (None, "")]
        if missing:
            raise SettingsError(
                f"{self.label} cannot start: environment variable(s) {', '.join(missing)} not set "
                f"(the {self.settings.SERVICE} stack sets them -- check the function's configuration)."
            )
        return settings
