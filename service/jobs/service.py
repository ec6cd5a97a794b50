"""Job rules: checking a training request up front, queueing it, reading and cancelling jobs.

Everything a request can get wrong is found here, before the job is queued: the dataset
(404), the target and feature names, the task, the method and every parameter (422 naming
them). Functions only add and flush; the request's transaction commits.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from service.config import Settings
from service.datasets import repository as datasets_repository
from service.datasets.ingest import is_storable_text
from service.db.tables import ColumnKind, DatasetColumnRecord, JobRecord, JobStatus, new_id
from service.db.types import utc_now
from service.errors import Conflict, FieldError, InvalidInput, NotFound
from service.jobs import repository
from service.jobs.estimate import TableHolding, estimate_job_bytes
from service.jobs.schemas import MAX_SEED, FoldsValidation, JobCreate
from service.methods import service as methods
from service.methods.catalog import Task
from service.training.data import MAX_CATEGORIES
from service.training.run import table_holding

ENDED_STATUSES = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)


def create_job(session: Session, request: JobCreate, settings: Settings) -> JobRecord:
    """Check the request and queue a job for it; returns the queued job."""
    # Locked, so a concurrent delete of the dataset waits for this job (PostgreSQL).
    dataset = datasets_repository.get(session, request.dataset_id, for_update=True)
    if dataset is None:
        raise NotFound(f"There is no dataset with id '{request.dataset_id}'.")
    columns = {c.name: c for c in datasets_repository.columns(session, dataset.id)}
    target = _target_column(columns, request.target)
    features = _features(columns, request.target, request.features)
    task = _task(target, request.task)
    method = methods.get_method_or_422(request.method)
    methods.check_task(method, task)
    resolved = methods.check_params(method, task, request.params, settings)
    _check_target_values(target, task)
    _check_categories([columns[name] for name in features])
    if (
        isinstance(request.validation, FoldsValidation)
        and request.validation.folds > dataset.n_rows
    ):
        raise InvalidInput(
            f"{request.validation.folds} folds need at least {request.validation.folds} rows; "
            f"the dataset has {dataset.n_rows}.",
            errors=[{"loc": ["body", "validation", "folds"], "msg": "more folds than rows"}],
        )
    _check_runtime(request.max_runtime_seconds, settings)
    n_classes = max(2, target.n_unique) if task == Task.CLASSIFICATION else 1
    # Only a method whose n_jobs are processes is charged for COPPICE_PROCESSES_PER_JOB of
    # them; boosting's n_jobs are threads of the one fit process, sharing its memory.
    estimator_class = method.estimator_class(task)
    parallel = "n_jobs" in estimator_class.parameter_defaults() and (
        getattr(estimator_class, "n_jobs_kind", "processes") == "processes"
    )
    processes = settings.processes_per_job if parallel else 1
    # Where the fit will hold the table: histogram trees keep codes read part by part, and out
    # of core on a cluster the workers hold the parts (a 16M-row table is no 46 GiB here),
    # with a holdout or none the target and the split too.
    holding = TableHolding(
        table_holding(
            method.name,
            task,
            resolved,
            cluster=settings.dask_scheduler is not None,
            validation=request.validation.model_dump(),
        )
    )
    _check_memory(
        method.name,
        resolved,
        dataset.n_rows,
        len(features),
        n_classes,
        processes,
        settings,
        holding,
    )
    if request.name is not None and not is_storable_text(request.name):
        raise InvalidInput(
            "The job name holds a NUL character or a lone surrogate, which cannot be stored.",
            errors=[{"loc": ["body", "name"], "msg": "unstorable characters"}],
        )
    job = JobRecord(
        id=new_id(),
        name=request.name,
        dataset_id=dataset.id,
        method=method.name,
        task=task.value,
        target=request.target,
        features=features,
        params=request.params,
        validation=request.validation.model_dump(),
        # Drawn here, not in the worker, so the job records the seed that reproduces it.
        seed=request.seed if request.seed is not None else secrets.randbelow(MAX_SEED + 1),
        max_runtime_seconds=request.max_runtime_seconds,
        status=JobStatus.QUEUED,
        progress=0.0,
        attempts=0,
        max_attempts=settings.max_attempts,
        cancel_requested=False,
        created_at=utc_now(),
    )
    repository.add(session, job)
    return job


def get_job(session: Session, job_id: str) -> JobRecord:
    job = repository.get(session, job_id)
    if job is None:
        raise NotFound(f"There is no job with id '{job_id}'.")
    return job


def list_jobs(
    session: Session,
    *,
    status: JobStatus | None,
    limit: int,
    offset: int,
    search_id: str | None = None,
) -> tuple[list[JobRecord], int]:
    return repository.list_page(
        session, status=status, limit=limit, offset=offset, search_id=search_id
    )


def cancel_job(session: Session, job_id: str) -> JobRecord:
    """Cancel a queued job at once; ask the worker to stop a running one; 409 once ended."""
    get_job(session, job_id)
    cancelled = repository.transition(
        session,
        job_id,
        from_statuses=(JobStatus.QUEUED,),
        status=JobStatus.CANCELLED,
        cancel_requested=True,
        stage="cancelled",
        finished_at=utc_now(),
    )
    if not cancelled:
        repository.transition(
            session, job_id, from_statuses=(JobStatus.RUNNING,), cancel_requested=True
        )
    job = get_job(session, job_id)  # re-read: the guarded updates bypass the ORM
    if job.status in ENDED_STATUSES and not cancelled:
        raise Conflict(
            f"Job '{job_id}' has already ended ({job.status}); only queued or running jobs "
            "can be cancelled."
        )
    return job


def _target_column(columns: dict[str, DatasetColumnRecord], name: str) -> DatasetColumnRecord:
    column = columns.get(name)
    if column is None:
        raise InvalidInput(
            f"The dataset has no column named '{name}' to use as the target.",
            errors=[{"loc": ["body", "target"], "msg": f"unknown column '{name}'"}],
        )
    return column


def _features(
    columns: dict[str, DatasetColumnRecord], target: str, requested: Sequence[str] | None
) -> list[str]:
    if requested is None:
        features = [name for name in columns if name != target]
        if not features:
            raise InvalidInput(
                "The dataset has no column besides the target to learn from.",
                errors=[{"loc": ["body", "features"], "msg": "no feature columns"}],
            )
        return features
    errors: list[FieldError] = []
    problems: list[str] = []
    if not requested:
        problems.append("'features' is empty; name at least one column, or leave it out")
        errors.append({"loc": ["body", "features"], "msg": "empty"})
    seen: set[str] = set()
    for index, name in enumerate(requested):
        loc: list[str | int] = ["body", "features", index]
        if name not in columns:
            problems.append(f"the dataset has no column named '{name}'")
            errors.append({"loc": loc, "msg": f"unknown column '{name}'"})
        elif name == target:
            problems.append(f"'{name}' is the target and cannot also be a feature")
            errors.append({"loc": loc, "msg": "the target"})
        elif name in seen:
            problems.append(f"'{name}' is listed twice")
            errors.append({"loc": loc, "msg": "repeated"})
        seen.add(name)
    if errors:
        detail = "; ".join(problems)
        raise InvalidInput(detail[0].upper() + detail[1:] + ".", errors=errors)
    return list(requested)


def _task(target: DatasetColumnRecord, requested: Task | None) -> Task:
    categorical = target.kind == ColumnKind.CATEGORICAL
    if requested is None:
        return Task.CLASSIFICATION if categorical else Task.REGRESSION
    if requested == Task.REGRESSION and categorical:
        raise InvalidInput(
            f"The target '{target.name}' is categorical, so it cannot be regressed; use "
            "task 'classification', or a numeric target.",
            errors=[{"loc": ["body", "task"], "msg": "regression needs a numeric target"}],
        )
    return requested


def _check_target_values(target: DatasetColumnRecord, task: Task) -> None:
    # A negative count is unknown (a registered table: only its footers were read); the fit
    # itself refuses a target with one class or one value.
    if target.n_unique >= 2 or target.n_unique < 0:
        return
    what = "classes" if task == Task.CLASSIFICATION else "distinct values"
    raise InvalidInput(
        f"The target '{target.name}' has {target.n_unique} {what}; "
        f"{task.value} needs at least two.",
        errors=[{"loc": ["body", "target"], "msg": f"fewer than two {what}"}],
    )


def _check_runtime(seconds: float | None, settings: Settings) -> None:
    if seconds is None or seconds <= settings.max_runtime_seconds:
        return
    raise InvalidInput(
        f"'max_runtime_seconds' is {seconds:g}; this server allows a job at most "
        f"{settings.max_runtime_seconds:g} seconds (COPPICE_MAX_RUNTIME_SECONDS).",
        errors=[{"loc": ["body", "max_runtime_seconds"], "msg": "above the server's limit"}],
    )


def _check_memory(
    method: str,
    params: dict[str, Any],
    n_rows: int,
    n_features: int,
    n_classes: int,
    processes: int,
    settings: Settings,
    holding: TableHolding,
) -> None:
    needed = estimate_job_bytes(
        method,
        params,
        n_rows=n_rows,
        n_features=n_features,
        n_classes=n_classes,
        n_jobs=processes,
        holding=holding,
    )
    if needed <= settings.max_job_memory_bytes:
        return
    raise InvalidInput(
        f"This job is estimated to need up to {_gib(needed)} of memory ({n_rows} rows × "
        f"{n_features} features with these params); this server allows a job at most "
        f"{_gib(settings.max_job_memory_bytes)} (COPPICE_MAX_JOB_MEMORY_BYTES). Use fewer "
        "rows, features or estimators, or bound the trees with max_depth, max_leaf_nodes "
        "or min_samples_leaf.",
        errors=[{"loc": ["body", "params"], "msg": "estimated memory above the server's limit"}],
    )


def _gib(n_bytes: int) -> str:
    return f"{n_bytes / 1024**3:.2f} GiB"


def _check_categories(features: Sequence[DatasetColumnRecord]) -> None:
    crowded = [
        c for c in features if c.kind == ColumnKind.CATEGORICAL and c.n_unique > MAX_CATEGORIES
    ]
    if crowded:
        raise InvalidInput(
            "A categorical feature may have at most "
            f"{MAX_CATEGORIES} categories; "
            + ", ".join(f"'{c.name}' has {c.n_unique}" for c in crowded)
            + ". Leave it out of 'features', or group its rare categories.",
            errors=[
                {"loc": ["body", "features"], "msg": f"'{c.name}' has too many categories"}
                for c in crowded
            ],
        )


def error_of(job: JobRecord) -> dict[str, Any] | None:
    if job.status != JobStatus.FAILED:
        return None
    return {"code": job.error_code or "failed", "message": job.error_message or ""}
