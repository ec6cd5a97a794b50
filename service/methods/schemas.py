"""Response bodies of ``GET /v1/methods``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from service.methods.catalog import Task


class MethodOut(BaseModel):
    name: str = Field(description="The name a job's 'method' takes.")
    tasks: list[Task]
    params_schema: dict[str, Any] = Field(
        description="JSON Schema (draft 2020-12) of the job's 'params' for this method."
    )
    description: str


class MethodList(BaseModel):
    items: list[MethodOut]
