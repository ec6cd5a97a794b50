"""HTTP routes of ``/v1/batch-predictions``: translate requests to service calls, and results to
bodies."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Query, Request, Response

from service.batch import service
from service.batch.schemas import BatchCreate, BatchOut, BatchPage
from service.db.session import reading
from service.db.tables import JobStatus
from service.deps import (
    DbEngineDep,
    ModelCacheDep,
    ReferenceCacheDep,
    SessionDep,
    SettingsDep,
    StoreDep,
    get_resources,
)
from service.errors import problem_responses
from service.jobs.schemas import JobError
from service.jobs.service import ENDED_STATUSES, error_of
from service.long_poll import Wait, wait_until
from service.paging import Limit, Offset

router = APIRouter(
    prefix="/v1/batch-predictions", tags=["batch predictions"], responses=problem_responses()
)


@router.post("", status_code=202)
def create_batch(
    body: BatchCreate,
    session: SessionDep,
    settings: SettingsDep,
    cache: ModelCacheDep,
    store: StoreDep,
    refs: ReferenceCacheDep,
    request: Request,
    response: Response,
    after_response: BackgroundTasks,
) -> BatchOut:
    """Queue the scoring of a stored dataset by a model; the output is a new dataset."""
    batch = service.create_batch(session, refs, cache, store, body, settings)
    response.headers["Location"] = f"/v1/batch-predictions/{batch[0].id}"
    worker = get_resources(request).worker
    if worker is not None:
        after_response.add_task(worker.wake)  # after the commit, as for a job
    return batch_out(batch)


@router.get("")
def list_batches(
    session: SessionDep,
    status: JobStatus | None = None,
    model_id: Annotated[
        str | None, Query(description="Only the batch predictions of this model id.")
    ] = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> BatchPage:
    """List batch predictions, newest first."""
    batches, total = service.list_batches(
        session, status=status, model_id=model_id, limit=limit, offset=offset
    )
    return BatchPage(items=[batch_out(batch) for batch in batches], total=total)


@router.get("/{batch_id}")
async def get_batch(
    batch_id: str, request: Request, db_engine: DbEngineDep, wait: Wait = 0.0
) -> BatchOut:
    """One batch prediction; with ``wait``, once it has ended or ``wait`` seconds have passed."""

    def read() -> BatchOut:
        with reading(db_engine) as session:
            return batch_out(service.get_batch(session, batch_id))

    return await wait_until(request, wait, read, lambda out: out.status in ENDED_STATUSES)


@router.post("/{batch_id}/cancel", status_code=202)
def cancel_batch(batch_id: str, session: SessionDep) -> BatchOut:
    """Cancel: a queued batch at once, a running one within seconds; 409 once it ended."""
    return batch_out(service.cancel_batch(session, batch_id))


def batch_out(batch: service.Batch) -> BatchOut:
    record, job = batch
    error = error_of(job)
    return BatchOut(
        id=record.id,
        name=record.name,
        status=JobStatus(job.status),
        progress=job.progress,
        stage=job.stage,
        model=record.model_ref,
        model_id=record.model_id,
        dataset_id=record.dataset_id,
        output_dataset_id=record.output_dataset_id,
        n_rows=record.n_rows,
        keep_columns=list(record.keep_columns),
        return_proba=record.return_proba,
        explain=record.explain,
        metrics=record.metrics,
        notes=list(record.notes or []),
        error=JobError(**error) if error else None,
        cancel_requested=job.cancel_requested,
        attempts=job.attempts,
        created_at=record.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
    )
