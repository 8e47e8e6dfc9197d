"""The flow API's request and response models (pydantic; camelCase on the wire): the contract the
resolver validates requests against."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from relay.api_models import ApiModel, ErrorResponse, FieldError

__all__ = ["ErrorResponse", "FieldError", "TaskAccepted", "TaskRequest"]


class TaskRequest(ApiModel):
    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    title: str = Field(min_length=1, max_length=200)


class TaskAccepted(ApiModel):
    task_id: str
    status: Literal["PENDING"] = Field("PENDING", description="Queued; the worker makes it DONE")
