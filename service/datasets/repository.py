"""All SQL about datasets: records in and out, never a commit (the caller owns the transaction)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session, undefer

from service.db.pages import newest_first, page_of
from service.db.tables import (
    ACTIVE_JOB_STATUSES,
    DatasetColumnRecord,
    DatasetPartRecord,
    DatasetRecord,
    JobRecord,
)


def add(
    session: Session,
    dataset: DatasetRecord,
    columns: Sequence[DatasetColumnRecord],
    parts: Sequence[DatasetPartRecord] = (),
) -> None:
    session.add(dataset)
    session.flush()  # the dataset row first: its columns and parts refer to it
    session.add_all(columns)
    session.add_all(parts)
    session.flush()


def parts(session: Session, dataset_id: str) -> list[DatasetPartRecord]:
    """The dataset's parts, first rows first."""
    return list(
        session.scalars(
            select(DatasetPartRecord)
            .where(DatasetPartRecord.dataset_id == dataset_id)
            .order_by(DatasetPartRecord.part)
        ).all()
    )


def get(session: Session, dataset_id: str, *, for_update: bool = False) -> DatasetRecord | None:
    statement = select(DatasetRecord).where(DatasetRecord.id == dataset_id)
    if for_update:
        # Serialises a delete with a job being created for it (PostgreSQL; SQLite ignores it).
        statement = statement.with_for_update()
    return session.scalars(statement).one_or_none()


def list_page(session: Session, *, limit: int, offset: int) -> tuple[list[DatasetRecord], int]:
    order = newest_first(DatasetRecord)
    return page_of(session, DatasetRecord, order_by=order, limit=limit, offset=offset)


def columns(
    session: Session, dataset_id: str, *, distributions: bool = False
) -> list[DatasetColumnRecord]:
    """The dataset's columns in order, without their data (``data`` is a deferred column);
    with their ``distribution`` (deferred too) loaded when ``distributions`` is true."""
    statement = (
        select(DatasetColumnRecord)
        .where(DatasetColumnRecord.dataset_id == dataset_id)
        .order_by(DatasetColumnRecord.position)
    )
    if distributions:
        statement = statement.options(undefer(DatasetColumnRecord.distribution))
    return list(session.scalars(statement).all())


def columns_with_data(
    session: Session, dataset_id: str, names: Collection[str]
) -> list[DatasetColumnRecord]:
    """The named columns with their data loaded; names the dataset lacks are simply absent."""
    if not names:
        return []
    return list(
        session.scalars(
            select(DatasetColumnRecord)
            .where(
                DatasetColumnRecord.dataset_id == dataset_id,
                DatasetColumnRecord.name.in_(list(names)),
            )
            .options(undefer(DatasetColumnRecord.data))
            .order_by(DatasetColumnRecord.position)
        ).all()
    )


def count_active_jobs(session: Session, dataset_id: str) -> int:
    """Jobs that are queued or running on this dataset."""
    statement = (
        select(func.count())
        .select_from(JobRecord)
        .where(JobRecord.dataset_id == dataset_id, JobRecord.status.in_(ACTIVE_JOB_STATUSES))
    )
    return session.scalar(statement) or 0


def delete_dataset(session: Session, dataset_id: str) -> None:
    # Columns go with it (ON DELETE CASCADE) and finished jobs keep a NULL dataset_id (SET
    # NULL): the schema's rules, held on both databases by tests/service/db/test_cascades.py.
    session.execute(delete(DatasetRecord).where(DatasetRecord.id == dataset_id))
    session.flush()
