"""The loyalty functions' settings and, per function, the ones it needs (``relay.settings``: the stack
and the function read the same declaration); the accrual rule comes from the stage config.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from relay.settings import FunctionEnvironment, ServiceSettings


class Settings(ServiceSettings):
    SERVICE: ClassVar[str] = "loyalty"

    points_table: str | None = None
    # The accrual rule: this many points per unit ordered (an order line of quantity 3 earns 3 x this).
    points_per_unit: int = Field(10, ge=0, le=10_000)


# What each function needs (the stack sets exactly these; the function checks them at cold start).
API = FunctionEnvironment(Settings, "api", required=("points_table",))
POINTS = FunctionEnvironment(Settings, "points", required=("points_table",), optional=("points_per_unit",))
