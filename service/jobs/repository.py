"""All SQL about jobs: never a commit (the caller owns the transaction).

State changes are guarded updates, ``UPDATE ... WHERE id = :id AND status IN (...)``, whose
row count tells the caller whether the transition happened; a row that moved on in the
meantime is never overwritten.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from service.db.pages import newest_first, page_of
from service.db.tables import BATCH_METHOD, JobRecord, JobStatus


def add(session: Session, job: JobRecord) -> None:
    session.add(job)
    session.flush()


def get(session: Session, job_id: str) -> JobRecord | None:
    return session.scalars(
        select(JobRecord).where(JobRecord.id == job_id).execution_options(populate_existing=True)
    ).one_or_none()


def list_page(
    session: Session,
    *,
    status: JobStatus | None,
    limit: int,
    offset: int,
    search_id: str | None = None,
) -> tuple[list[JobRecord], int]:
    # Batch predictions queue through this table but are listed as /v1/batch-predictions.
    where = [JobRecord.method != BATCH_METHOD]
    if status is not None:
        where.append(JobRecord.status == status)
    if search_id is not None:
        where.append(JobRecord.search_id == search_id)
    return page_of(
        session,
        JobRecord,
        order_by=newest_first(JobRecord),
        limit=limit,
        offset=offset,
        where=where,
    )


def transition(
    session: Session, job_id: str, *, from_statuses: Collection[JobStatus], **values: Any
) -> bool:
    """Set ``values`` on the job if its status is one of ``from_statuses``; True if it was."""
    result = session.execute(
        update(JobRecord)
        .where(JobRecord.id == job_id, JobRecord.status.in_(list(from_statuses)))
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    session.flush()
    return bool(result.rowcount)  # type: ignore[attr-defined]
