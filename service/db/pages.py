"""One page of a table's rows and the count of all that match: every ``/v1`` list endpoint."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

__all__ = ["newest_first", "page_of"]

Record = TypeVar("Record")


def newest_first(record: Any) -> tuple[Any, ...]:
    """Newest first; the id breaks ties between rows created at the same moment, so pages
    are stable."""
    return (record.created_at.desc(), record.id)


def page_of(
    session: Session,
    record: type[Record],
    *,
    order_by: Sequence[Any],
    limit: int,
    offset: int,
    where: Sequence[ColumnElement[bool]] = (),
) -> tuple[list[Record], int]:
    """The rows of ``record`` matching ``where`` on the page ``limit``/``offset`` of
    ``order_by``, and how many match in all."""
    total = session.scalar(select(func.count()).select_from(record).where(*where)) or 0
    page = select(record).where(*where).order_by(*order_by).limit(limit).offset(offset)
    return list(session.scalars(page).all()), total
