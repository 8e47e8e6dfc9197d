"""The models every HTTP API shares (pydantic; camelCase on the wire): the base of a service's API
models and the error answer ``{"error", "message", "fields"}`` (``relay.api.ErrorAnswers``).

A service may subclass the error models to document examples of its own; the names stay
``FieldError`` and ``ErrorResponse`` in its OpenAPI document.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class ApiModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class FieldError(ApiModel):
    field: str
    message: str


class ErrorResponse(ApiModel):
    error: str
    message: str
    fields: list[FieldError] | None = None
