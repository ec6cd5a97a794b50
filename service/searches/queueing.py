"""Queueing a search's candidates as ordinary jobs, so every worker shares the search.

Every candidate gets the search's seed, so all of them deal the rows into the same folds (one
stored assignment per search: stacking and halving both need identical splits; H2O's
``stacked-ensembles.rst``), and keeps its out-of-fold predictions when it trains on all rows.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from service.config import Settings
from service.db.tables import JobRecord, JobStatus, SearchCandidateRecord, SearchRecord, new_id
from service.db.types import utc_now
from service.jobs import repository as job_repository
from service.jobs import service as jobs
from service.jobs.schemas import FoldsValidation, JobCreate
from service.methods.catalog import Task
from service.searches import repository
from service.searches.planner import Config


def queue_first(
    session: Session,
    search: SearchRecord,
    configs: list[Config],
    *,
    rows: int | None,
    settings: Settings,
) -> None:
    """Queue the first jobs through the jobs service, which checks each as POST /v1/jobs does
    (memory estimate included, on every row of the dataset)."""
    for index, config in enumerate(configs):
        job = jobs.create_job(
            session,
            JobCreate(
                dataset_id=search.dataset_id or "",
                target=search.target,
                task=Task(search.task),
                features=list(search.features),
                method=config.method,
                params=config.params,
                validation=FoldsValidation(folds=search.folds),
                seed=search.seed,
                name=_name(search, index, config.method),
                max_runtime_seconds=_runtime(search, settings),
            ),
            settings,
        )
        job.validation = validation(search, rows)
        job.search_id = search.id
        repository.add(
            session,
            SearchCandidateRecord(
                job_id=job.id, search_id=search.id, config_index=index, rung=0, n_rows=rows
            ),
        )


def queue_again(
    session: Session,
    search: SearchRecord,
    previous: list[tuple[SearchCandidateRecord, JobRecord]],
    *,
    rung: int,
    rows: int | None,
) -> None:
    """Queue already-checked configurations once more (halving's next rung, more rows)."""
    now = utc_now()
    for candidate, old in previous:
        job = JobRecord(
            id=new_id(),
            name=_name(search, candidate.config_index, old.method, rung),
            dataset_id=old.dataset_id,
            method=old.method,
            task=old.task,
            target=old.target,
            features=list(old.features),
            params=dict(old.params),
            validation=validation(search, rows),
            seed=old.seed,
            max_runtime_seconds=old.max_runtime_seconds,
            status=JobStatus.QUEUED,
            progress=0.0,
            attempts=0,
            max_attempts=old.max_attempts,
            cancel_requested=False,
            created_at=now,
            search_id=search.id,
        )
        job_repository.add(session, job)
        repository.add(
            session,
            SearchCandidateRecord(
                job_id=job.id,
                search_id=search.id,
                config_index=candidate.config_index,
                rung=rung,
                n_rows=rows,
            ),
        )


def validation(search: SearchRecord, rows: int | None) -> dict[str, object]:
    """The job's validation: the search's folds; halving's rows; predictions kept on all rows."""
    if rows is None:
        return {"folds": search.folds, "keep_predictions": True}
    return {"folds": search.folds, "rows": rows}


def _runtime(search: SearchRecord, settings: Settings) -> float | None:
    seconds = search.budget.get("max_seconds")
    return None if seconds is None else min(float(seconds), settings.max_runtime_seconds)


def _name(search: SearchRecord, index: int, method: str, rung: int = 0) -> str:
    label = search.name or f"search {search.id[:8]}"
    return f"{label}: {method} #{index + 1}" + (f" (rung {rung})" if rung else "")
