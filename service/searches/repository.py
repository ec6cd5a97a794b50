"""All SQL about searches: never a commit (the caller owns the transaction).

State changes are guarded updates whose row count tells the caller whether it made the
transition, so two workers moving the same search on never both do a step.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import Session, defer

from service.db.pages import newest_first, page_of
from service.db.tables import (
    JobRecord,
    JobStatus,
    ModelRecord,
    SearchCandidateRecord,
    SearchRecord,
    SearchStatus,
)


def add(session: Session, record: SearchRecord | SearchCandidateRecord) -> None:
    session.add(record)
    session.flush()


def get(session: Session, search_id: str) -> SearchRecord | None:
    return session.scalars(
        select(SearchRecord)
        .where(SearchRecord.id == search_id)
        .execution_options(populate_existing=True)
    ).one_or_none()


def list_page(
    session: Session, *, status: SearchStatus | None, limit: int, offset: int
) -> tuple[list[SearchRecord], int]:
    where = [] if status is None else [SearchRecord.status == status]
    order = newest_first(SearchRecord)
    return page_of(session, SearchRecord, order_by=order, limit=limit, offset=offset, where=where)


def transition(
    session: Session, search_id: str, *, from_statuses: Collection[SearchStatus], **values: Any
) -> bool:
    """Set ``values`` if the search's status is one of ``from_statuses``; True if it was."""
    result = session.execute(
        update(SearchRecord)
        .where(SearchRecord.id == search_id, SearchRecord.status.in_(list(from_statuses)))
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    session.flush()
    assert isinstance(result, CursorResult)
    return bool(result.rowcount)


def claim_rung(session: Session, search_id: str, rung: int) -> bool:
    """Take the step past ``rung`` (guarded on the rung itself); True for the one winner."""
    result = session.execute(
        update(SearchRecord)
        .where(
            SearchRecord.id == search_id,
            SearchRecord.status == SearchStatus.RUNNING,
            SearchRecord.rung == rung,
        )
        .values(rung=rung + 1)
        .execution_options(synchronize_session=False)
    )
    assert isinstance(result, CursorResult)
    return bool(result.rowcount)


def claim_stacking(session: Session, search_id: str, *, now: datetime, stale: datetime) -> bool:
    """Take the final step (stack, rank, register): from running, or from a stacking step
    whose worker has not finished it since ``stale`` (it died)."""
    result = session.execute(
        update(SearchRecord)
        .where(
            SearchRecord.id == search_id,
            or_(
                SearchRecord.status == SearchStatus.RUNNING,
                (SearchRecord.status == SearchStatus.STACKING)
                & (SearchRecord.stacking_started_at < stale),
            ),
        )
        .values(status=SearchStatus.STACKING, stacking_started_at=now)
        .execution_options(synchronize_session=False)
    )
    assert isinstance(result, CursorResult)
    return bool(result.rowcount)


def active_ids(session: Session) -> list[str]:
    """Searches a worker may have to move on: running, or stacking (possibly stale)."""
    return list(
        session.scalars(
            select(SearchRecord.id)
            .where(SearchRecord.status.in_([SearchStatus.RUNNING, SearchStatus.STACKING]))
            .order_by(SearchRecord.created_at)
        ).all()
    )


def candidates(
    session: Session, search_id: str
) -> list[tuple[SearchCandidateRecord, JobRecord, ModelRecord | None]]:
    """Every candidate of the search with its job and, once trained, its model."""
    rows = session.execute(
        select(SearchCandidateRecord, JobRecord, ModelRecord)
        .join(JobRecord, JobRecord.id == SearchCandidateRecord.job_id)
        .outerjoin(ModelRecord, ModelRecord.job_id == JobRecord.id)
        .where(SearchCandidateRecord.search_id == search_id)
        .order_by(SearchCandidateRecord.rung, JobRecord.created_at, JobRecord.id)
        # Learning curves can be long and nothing here reads them.
        .options(defer(ModelRecord.curves))
        .execution_options(populate_existing=True)
    ).all()
    return [(row[0], row[1], row[2]) for row in rows]


def has_active_jobs(session: Session, search_id: str) -> bool:
    """Whether any job of the search is queued or running (one indexed probe)."""
    active = select(JobRecord.id).where(
        JobRecord.search_id == search_id,
        JobRecord.status.in_([JobStatus.QUEUED, JobStatus.RUNNING]),
    )
    return session.execute(active.limit(1)).first() is not None


def job_counts(session: Session, search_ids: Sequence[str]) -> dict[str, dict[str, int]]:
    """``{search_id: {status: n}}`` over the searches' jobs."""
    rows = session.execute(
        select(JobRecord.search_id, JobRecord.status, func.count())
        .where(JobRecord.search_id.in_(list(search_ids)))
        .group_by(JobRecord.search_id, JobRecord.status)
    ).all()
    counts: dict[str, dict[str, int]] = {search_id: {} for search_id in search_ids}
    for search_id, status, n in rows:
        counts[str(search_id)][str(status)] = int(n)
    return counts


def stop_jobs(session: Session, search_id: str, *, now: datetime) -> None:
    """Cancel the search's queued jobs and ask its running ones to stop."""
    session.execute(
        update(JobRecord)
        .where(JobRecord.search_id == search_id, JobRecord.status == JobStatus.QUEUED)
        .values(
            status=JobStatus.CANCELLED, cancel_requested=True, stage="cancelled", finished_at=now
        )
        .execution_options(synchronize_session=False)
    )
    session.execute(
        update(JobRecord)
        .where(
            JobRecord.search_id == search_id,
            JobRecord.status == JobStatus.RUNNING,
            JobRecord.cancel_requested.is_(False),
        )
        .values(cancel_requested=True)
        .execution_options(synchronize_session=False)
    )
    session.flush()
