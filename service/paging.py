"""The ``limit`` and ``offset`` query parameters every ``/v1`` list endpoint takes."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

MAX_LIMIT = 1000
# SQLite and PostgreSQL both read OFFSET as a signed 64-bit integer; a larger one fails in the
# database driver (a 500), so it is refused as a 422 before any SQL is built.
MAX_OFFSET = 2**63 - 1

Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Items on one page.")]
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET, description="Items to skip, newest first.")]
