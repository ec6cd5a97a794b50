"""HTTP routes of ``/v1/jobs``: translate requests to service calls, and results to bodies."""

from __future__ import annotations

import time
from typing import Annotated

import anyio
from anyio import to_thread
from fastapi import APIRouter, BackgroundTasks, Query, Request, Response
from sqlalchemy import Engine

from service.db.session import reading
from service.db.tables import JobRecord, JobStatus
from service.deps import DbEngineDep, SessionDep, SettingsDep, get_resources
from service.errors import problem_responses
from service.jobs import service
from service.jobs.schemas import JobCreate, JobError, JobOut, JobPage
from service.methods.catalog import Task
from service.paging import Limit, Offset

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], responses=problem_responses())

# Longest a GET of one job may wait for it to end, and how often it looks meanwhile: a
# primary-key read every 0.1 s costs the server a hundredth of what a client polling over
# HTTP as often would, and a fit beside it on a small machine feels the difference.
MAX_WAIT_SECONDS = 30.0
WAIT_POLL_SECONDS = 0.1


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
    job_id: str,
    request: Request,
    db_engine: DbEngineDep,
    wait: Annotated[
        float,
        Query(
            ge=0,
            le=MAX_WAIT_SECONDS,
            description=(
                "Seconds to wait for the job to end before answering (at most "
                f"{MAX_WAIT_SECONDS:g}): the answer comes as soon as it has ended, or with its "
                "state then. One request instead of a polling loop."
            ),
        ),
    ] = 0.0,
) -> JobOut:
    """One job; with ``wait``, once it has ended or ``wait`` seconds have passed."""
    deadline = time.monotonic() + wait
    while True:
        job = await to_thread.run_sync(_read_job, db_engine, job_id)
        remaining = deadline - time.monotonic()
        if job.status in service.ENDED_STATUSES or remaining <= 0 or _stopping(request):
            return job
        await anyio.sleep(min(WAIT_POLL_SECONDS, remaining))


def _read_job(db_engine: Engine, job_id: str) -> JobOut:
    with reading(db_engine) as session:  # a session per look: it sees the latest commit
        return job_out(service.get_job(session, job_id))


def _stopping(request: Request) -> bool:
    """Whether the server is shutting down: a waiting request then answers at once, so it
    does not hold up the shutdown (uvicorn waits for requests in flight)."""
    return bool(getattr(request.app.state, "stopping", lambda: False)())


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
    )
