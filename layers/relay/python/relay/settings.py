"""A function's configuration, read from its environment once and validated (every service's
``settings.py`` subclasses ``FunctionSettings``).

Each function gets only the variables its own work needs, so a setting not every function of a
service needs is optional in the model and asked for with ``settings.require("...")``, which names
the missing environment variable instead of failing with a KeyError deep in a call. A bad value
fails at the first use with every problem named by its variable::

    class Settings(FunctionSettings):
        SERVICE: ClassVar[str] = "orders"
        ENV_NAMES: ClassVar[dict[str, str]] = {"orders_table": "ORDERS_TABLE", ...}

        orders_table: str | None = None
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError


class SettingsError(RuntimeError):
    """The function's environment is incomplete or invalid: a deployment problem, not a message problem."""


class FunctionSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    SERVICE: ClassVar[str] = "relay"
    """The service (and stack) name used in error messages."""
    ENV_NAMES: ClassVar[dict[str, str]] = {}
    """Field name -> environment variable."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field, name in cls.ENV_NAMES.items():
            raw = env.get(name)
            if raw is not None and raw.strip() != "":
                values[field] = raw.strip()
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problems = "; ".join(
                f"{cls.ENV_NAMES.get(str(err['loc'][0]), err['loc'][0]) if err['loc'] else '?'}: {err['msg']}"
                for err in exc.errors()
            )
            raise SettingsError(f"invalid {cls.SERVICE} configuration: {problems}") from None

    def require(self, field: str) -> str:
        """The value of an optional setting this function cannot work without."""
        value = getattr(self, field)
        if not value:
            raise SettingsError(
                f"environment variable {self.ENV_NAMES[field]} is not set; this function needs it "
                f"(the {self.SERVICE} stack sets it -- check the function's configuration)."
            )
        return str(value)


def http_url(value: str | None, *, example: str, strip_slash: bool = True) -> str | None:
    """Validator body for a configured http(s) URL (https on AWS: the stage config enforces that)."""
    if value is None:
        return None
    if not value.startswith(("https://", "http://")):
        raise ValueError(f"must be an http(s) URL, e.g. {example}")
    return value.rstrip("/") if strip_slash else value
