"""HTTP routes of ``/v1/searches``: translate requests to service calls, and results to bodies."""

from __future__ import annotations

from fastapi import APIRouter, BackgroundTasks, Request, Response
from sqlalchemy.orm import Session

from service.db.session import reading
from service.db.tables import SearchRecord, SearchStatus
from service.deps import DbEngineDep, SessionDep, SettingsDep, get_resources
from service.errors import problem_responses
from service.long_poll import Wait, wait_until
from service.methods.catalog import Task
from service.paging import Limit, Offset
from service.searches import leaderboard, repository, service
from service.searches.schemas import (
    JobCounts,
    Registration,
    SearchCreate,
    SearchOut,
    SearchPage,
    SearchSummary,
    Strategy,
)
from service.searches.validation import direction_of

router = APIRouter(prefix="/v1/searches", tags=["searches"], responses=problem_responses())


@router.post("", status_code=202)
def create_search(
    body: SearchCreate,
    session: SessionDep,
    settings: SettingsDep,
    request: Request,
    response: Response,
    after_response: BackgroundTasks,
) -> SearchOut:
    """Start a search: every candidate is checked, then queued as an ordinary job."""
    search = service.create_search(session, body, settings)
    response.headers["Location"] = f"/v1/searches/{search.id}"
    worker = get_resources(request).worker
    if worker is not None:
        after_response.add_task(worker.wake)  # after the commit, as for POST /v1/jobs
    return search_out(session, search)


@router.get("")
def list_searches(
    session: SessionDep,
    status: SearchStatus | None = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> SearchPage:
    """List searches, newest first, optionally only those in one status."""
    records, total = service.list_searches(session, status=status, limit=limit, offset=offset)
    counts = repository.job_counts(session, [record.id for record in records])
    items = [_summary(record, counts[record.id], _n_models(session, record)) for record in records]
    return SearchPage(items=items, total=total)


ENDED = frozenset({SearchStatus.SUCCEEDED, SearchStatus.FAILED, SearchStatus.CANCELLED})


@router.get("/{search_id}")
async def get_search(
    search_id: str, request: Request, db_engine: DbEngineDep, wait: Wait = 0.0
) -> SearchOut:
    """One search with its leaderboard, best first; with ``wait``, once it has ended or
    ``wait`` seconds have passed."""

    def read() -> SearchOut:
        with reading(db_engine) as session:  # a session per look: it sees the latest commit
            return search_out(session, service.get_search(session, search_id))

    return await wait_until(request, wait, read, lambda search: search.status in ENDED)


@router.post("/{search_id}/cancel", status_code=202)
def cancel_search(search_id: str, session: SessionDep) -> SearchOut:
    """Cancel what is left of a search and keep what finished; 409 once it has ended."""
    return search_out(session, service.cancel_search(session, search_id))


def search_out(session: Session, search: SearchRecord) -> SearchOut:
    ranked = leaderboard.entries(repository.candidates(session, search.id), search.metric)
    counts = repository.job_counts(session, [search.id])[search.id]
    summary = _summary(search, counts, len(ranked))
    return SearchOut(
        **summary.model_dump(),
        features=list(search.features),
        candidates=list(search.candidates),
        plan=dict(search.plan),
        budget=dict(search.budget),
        folds=search.folds,
        stack=search.stack,
        register_as=search.register_as,
        registration=Registration(**search.registration) if search.registration else None,
        seed=search.seed,
        notes=list(search.notes),
        leaderboard=leaderboard.rows(ranked),
    )


def _n_models(session: Session, search: SearchRecord) -> int:
    return len(leaderboard.entries(repository.candidates(session, search.id), search.metric))


def _summary(search: SearchRecord, counts: dict[str, int], n_models: int) -> SearchSummary:
    return SearchSummary(
        id=search.id,
        name=search.name,
        status=SearchStatus(search.status),
        progress=service.progress(search, counts),
        strategy=Strategy(search.strategy),
        auto=search.auto,
        metric=search.metric,
        direction="maximize" if direction_of(search.metric) == "maximize" else "minimize",
        dataset_id=search.dataset_id,
        target=search.target,
        task=Task(search.task),
        n_models=n_models,
        best_model_id=search.best_model_id,
        stack_model_id=search.stack_model_id,
        jobs=JobCounts(**{status: counts.get(status, 0) for status in JobCounts.model_fields}),
        created_at=search.created_at,
        finished_at=search.finished_at,
    )
