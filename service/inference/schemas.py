"""Bodies of the Open Inference Protocol (KServe v2) endpoints."""

from __future__ import annotations

from pydantic import BaseModel


class LiveResponse(BaseModel):
    live: bool


class ReadyResponse(BaseModel):
    ready: bool
