"""All SQL about batch predictions: records in and out, never a commit (the caller owns it)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from service.batch.outcome import BatchOutcome
from service.datasets import repository as datasets
from service.datasets.service import column_records, part_records
from service.db.pages import newest_first
from service.db.tables import BatchPredictionRecord, DatasetRecord, JobRecord, JobStatus

Batch = tuple[BatchPredictionRecord, JobRecord]


def add(session: Session, batch: BatchPredictionRecord) -> None:
    """The batch's row; its job's row is added first (``service.jobs.repository.add``)."""
    session.add(batch)
    session.flush()


def get(session: Session, batch_id: str) -> Batch | None:
    found = session.execute(
        select(BatchPredictionRecord, JobRecord)
        .join(JobRecord, JobRecord.id == BatchPredictionRecord.id)
        .where(BatchPredictionRecord.id == batch_id)
        .execution_options(populate_existing=True)
    ).one_or_none()
    return None if found is None else (found[0], found[1])


def list_page(
    session: Session,
    *,
    status: JobStatus | None,
    model_id: str | None,
    limit: int,
    offset: int,
) -> tuple[list[Batch], int]:
    where = []
    if status is not None:
        where.append(JobRecord.status == status)
    if model_id is not None:
        where.append(BatchPredictionRecord.model_id == model_id)
    joined = (
        select(BatchPredictionRecord, JobRecord)
        .join(JobRecord, JobRecord.id == BatchPredictionRecord.id)
        .where(*where)
    )
    total = session.scalar(select(func.count()).select_from(joined.subquery())) or 0
    rows = session.execute(
        joined.order_by(*newest_first(BatchPredictionRecord)).limit(limit).offset(offset)
    ).all()
    return [(row[0], row[1]) for row in rows], total


def record_output(session: Session, batch_id: str, outcome: BatchOutcome, *, now: datetime) -> None:
    """Name the output dataset (its row, columns and parts) and write the batch's result; the
    job queue calls this in the transaction that ends the job (``worker.queue.finish_scored``)."""
    dataset = DatasetRecord(
        id=outcome.dataset_id,
        name=outcome.name,
        n_rows=outcome.n_rows,
        n_columns=len(outcome.kinds),
        size_bytes=outcome.size_bytes,
        sha256=outcome.sha256,
        created_at=now,
    )
    datasets.add(
        session,
        dataset,
        column_records(outcome.dataset_id, outcome.kinds, outcome.summaries),
        part_records(outcome.dataset_id, outcome.parts),
    )
    session.execute(
        update(BatchPredictionRecord)
        .where(BatchPredictionRecord.id == batch_id)
        .values(
            output_dataset_id=outcome.dataset_id,
            n_rows=outcome.n_rows,
            metrics=outcome.metrics,
            notes=outcome.notes,
        )
        .execution_options(synchronize_session=False)
    )
    session.flush()
