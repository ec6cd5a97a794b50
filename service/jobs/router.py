"""HTTP routes of ``/v1/jobs``: translate requests to service calls, and results to bodies."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Query, Request, Response

from service.db.session import reading
from service.db.tables import JobRecord, JobStatus
from service.deps import DbEngineDep, SessionDep, SettingsDep, get_resources
from service.errors import problem_responses
from service.jobs import service
from service.jobs.schemas import JobCreate, JobError, JobOut, JobPage, JobResources
from service.long_poll import Wait, wait_until
from service.methods.catalog import Task
from service.paging import Limit, Offset

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], responses=problem_responses())


@router.post("", status_code=202)
def create_job(
    body: JobCreate,
    session: SessionDep,
    settings: SettingsDep,
    request: Request,
    response: Response,
    after_response: BackgroundTasks,
) -> JobOut:
    """Queue a training job; everything in the request is checked before it is queued."""
    job = service.create_job(session, body, settings)
    response.headers["Location"] = f"/v1/jobs/{job.id}"
    worker = get_resources(request).worker
    if worker is not None:
        # After the response, so after the commit: woken earlier, the worker would not see
        # the job yet and would sleep a whole poll interval.
        after_response.add_task(worker.wake)
    return job_out(job)


@router.get("")
def list_jobs(
    session: SessionDep,
    status: JobStatus | None = None,
    search_id: Annotated[
        str | None, Query(description="Only the candidates of this search (POST /v1/searches).")
    ] = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> JobPage:
    """List jobs, newest first, optionally only those in one status or of one search."""
    records, total = service.list_jobs(
        session, status=status, limit=limit, offset=offset, search_id=search_id
    )
    return JobPage(items=[job_out(record) for record in records], total=total)


@router.get("/{job_id}")
async def get_job(
    job_id: str, request: Request, db_engine: DbEngineDep, wait: Wait = 0.0
) -> JobOut:
    """One job; with ``wait``, once it has ended or ``wait`` seconds have passed."""

    def read() -> JobOut:
        with reading(db_engine) as session:  # a session per look: it sees the latest commit
            return job_out(service.get_job(session, job_id))

    return await wait_until(request, wait, read, lambda job: job.status in service.ENDED_STATUSES)


@router.post("/{job_id}/cancel", status_code=202)
def cancel_job(job_id: str, session: SessionDep) -> JobOut:
    """Cancel a job: a queued one at once, a running one within seconds; 409 once it ended."""
    return job_out(service.cancel_job(session, job_id))


def job_out(job: JobRecord) -> JobOut:
    error = service.error_of(job)
    return JobOut(
        id=job.id,
        name=job.name,
        status=JobStatus(job.status),
        progress=job.progress,
        stage=job.stage,
        method=job.method,
        task=Task(job.task),
        dataset_id=job.dataset_id,
        target=job.target,
        features=list(job.features),
        params=dict(job.params),
        validation=dict(job.validation),
        seed=job.seed,
        max_runtime_seconds=job.max_runtime_seconds,
        model_id=job.model_id,
        search_id=job.search_id,
        error=JobError(**error) if error else None,
        cancel_requested=job.cancel_requested,
        attempts=job.attempts,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        resources=JobResources(**job.resources) if job.resources else None,
    )
