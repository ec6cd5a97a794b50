"""Search rules: checking a search request, planning it, queueing it, reading and cancelling.

Everything a request can get wrong is found before the first job is queued (the dataset, the
target, every method and every value its space can produce, the budget, ``register_as``), so
the whole search is queued in the request's transaction or not at all.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

import numpy as np
from sqlalchemy.orm import Session

from service.config import Settings
from service.datasets import repository as datasets_repository
from service.db.tables import (
    ColumnKind,
    DatasetColumnRecord,
    JobStatus,
    SearchRecord,
    SearchStatus,
    new_id,
)
from service.db.types import utc_now
from service.errors import Conflict, InvalidInput, NotFound
from service.jobs.schemas import MAX_SEED
from service.methods.catalog import CATALOG, Task
from service.searches import (
    auto,
    planner,
    queueing,
    registration,
    repository,
    spaces,
    validation,
)
from service.searches.schemas import MAX_MODELS, CandidateSpace, SearchCreate, Strategy

ENDED = (SearchStatus.SUCCEEDED, SearchStatus.FAILED, SearchStatus.CANCELLED)


def create_search(session: Session, request: SearchCreate, settings: Settings) -> SearchRecord:
    """Check, plan and queue a search; returns it with its first candidates queued."""
    dataset = datasets_repository.get(session, request.dataset_id, for_update=True)
    if dataset is None:
        raise NotFound(f"There is no dataset with id '{request.dataset_id}'.")
    columns = {c.name: c for c in datasets_repository.columns(session, dataset.id)}
    task = _task(columns, request)
    features = request.features or [name for name in columns if name != request.target]
    metric, _ = validation.metric_and_direction(request.metric, task)
    _check_request(request, dataset.n_rows)
    seed = request.seed if request.seed is not None else secrets.randbelow(MAX_SEED + 1)
    asked, defaults, max_models, plan = _spaces(request, task, dataset.n_rows, len(features))
    # Auto's spaces have ranges, which a grid cannot enumerate: it draws them at random.
    grid_of_auto = request.auto and request.strategy == Strategy.GRID
    strategy = Strategy.RANDOM if grid_of_auto else request.strategy
    configs = _configurations(asked, defaults, task, strategy, max_models, seed, settings)
    rows = None
    if strategy == Strategy.HALVING:
        n_classes = columns[request.target].n_unique if task == Task.CLASSIFICATION else 1
        min_rows = max(2 * request.validation.folds * n_classes, 50)
        rungs = planner.halving_rungs(len(configs), dataset.n_rows, min_rows)
        plan["rungs"] = [{"candidates": r.candidates, "rows": r.rows} for r in rungs]
        rows = rungs[0].rows if len(rungs) > 1 else None
    plan["n_configurations"] = len(configs)
    now = utc_now()
    search = SearchRecord(
        id=new_id(),
        name=request.name,
        dataset_id=dataset.id,
        target=request.target,
        task=task.value,
        features=features,
        strategy=strategy.value,
        auto=request.auto,
        candidates=[space.model_dump() for space in asked],
        plan=plan,
        budget=request.budget.model_dump(),
        folds=request.validation.folds,
        metric=metric,
        stack=request.stack,
        register_as=request.register_as,
        registration=None
        if request.register_as is None
        else {"status": "pending", "name": request.register_as},
        seed=seed,
        status=SearchStatus.RUNNING,
        rung=0,
        deadline_at=None
        if request.budget.max_seconds is None
        else now + timedelta(seconds=request.budget.max_seconds),
        notes=[],
        created_at=now,
    )
    repository.add(session, search)
    queueing.queue_first(session, search, configs, rows=rows, settings=settings)
    return search


def _check_request(request: SearchCreate, n_rows: int) -> None:
    if request.register_as is not None:
        registration.check_name(request.register_as)
    if (request.candidates is None) == (not request.auto):
        raise InvalidInput(
            "Give either 'candidates' or \"auto\": true (not both, and not neither).",
            errors=[{"loc": ["body", "candidates"], "msg": "candidates or auto"}],
        )
    if request.validation.folds > n_rows:
        raise InvalidInput(
            f"{request.validation.folds} folds need at least {request.validation.folds} rows; "
            f"the dataset has {n_rows}.",
            errors=[{"loc": ["body", "validation", "folds"], "msg": "more folds than rows"}],
        )


def _spaces(
    request: SearchCreate, task: Task, n_rows: int, n_features: int
) -> tuple[list[CandidateSpace], list[CandidateSpace], int | None, dict[str, object]]:
    """The spaces searched, the defaults trained first, the model budget, and the plan so far."""
    if not request.auto:
        return list(request.candidates or []), [], request.budget.max_models, {}
    chosen = auto.plan(
        task,
        n_rows=n_rows,
        n_features=n_features,
        folds=request.validation.folds,
        max_models=request.budget.max_models,
        max_seconds=request.budget.max_seconds,
    )
    return (
        [CandidateSpace(**space) for space in chosen.spaces],
        [CandidateSpace(**space) for space in chosen.defaults],
        chosen.max_models,
        {"auto": chosen.notes},
    )


def _configurations(
    asked: list[CandidateSpace],
    defaults: list[CandidateSpace],
    task: Task,
    strategy: Strategy,
    max_models: int | None,
    seed: int,
    settings: Settings,
) -> list[planner.Config]:
    """Every configuration to train, each checked as a whole (422 naming the first problem)."""
    entries = validation.checked_entries(asked, task, strategy, settings, max_models=max_models)
    first = [
        planner.Config(method, point, -1)
        for method, space in validation.checked_entries(defaults, task, Strategy.GRID, settings)
        for point in spaces.grid(space)
    ]
    remaining = None if max_models is None else max(max_models - len(first), 0)
    rng = np.random.default_rng(seed)
    configs = first + (
        planner.configurations(entries, strategy, remaining, rng) if remaining != 0 else []
    )
    if len(configs) > MAX_MODELS:
        raise InvalidInput(
            f"The grid has {len(configs)} points; a search trains at most {MAX_MODELS}. "
            "Shorten the lists, or set budget.max_models.",
            errors=[{"loc": ["body", "budget", "max_models"], "msg": "grid above the limit"}],
        )
    for index, config in enumerate(configs):
        validation.check_config(
            CATALOG[config.method], task, config.params, settings, ["body", "candidates", index]
        )
    return configs


def _task(columns: dict[str, DatasetColumnRecord], request: SearchCreate) -> Task:
    target = columns.get(request.target)
    if target is None:
        raise InvalidInput(
            f"The dataset has no column named '{request.target}' to use as the target.",
            errors=[{"loc": ["body", "target"], "msg": f"unknown column '{request.target}'"}],
        )
    categorical = target.kind == ColumnKind.CATEGORICAL
    if request.task is None:
        return Task.CLASSIFICATION if categorical else Task.REGRESSION
    if request.task == Task.REGRESSION and categorical:
        raise InvalidInput(
            f"The target '{request.target}' is categorical, so it cannot be regressed.",
            errors=[{"loc": ["body", "task"], "msg": "regression needs a numeric target"}],
        )
    return request.task


def get_search(session: Session, search_id: str) -> SearchRecord:
    search = repository.get(session, search_id)
    if search is None:
        raise NotFound(f"There is no search with id '{search_id}'.")
    return search


def list_searches(
    session: Session, *, status: SearchStatus | None, limit: int, offset: int
) -> tuple[list[SearchRecord], int]:
    return repository.list_page(session, status=status, limit=limit, offset=offset)


def cancel_search(session: Session, search_id: str) -> SearchRecord:
    """Cancel what is left (queued candidates at once, running ones within seconds) and keep
    what finished: its models and leaderboard stay; 409 once the search has ended."""
    get_search(session, search_id)
    now = utc_now()
    cancelled = repository.transition(
        session,
        search_id,
        from_statuses=(SearchStatus.RUNNING, SearchStatus.STACKING),
        status=SearchStatus.CANCELLED,
        finished_at=now,
    )
    search = get_search(session, search_id)
    if not cancelled:
        raise Conflict(
            f"Search '{search_id}' has already ended ({search.status}); only a running search "
            "can be cancelled."
        )
    repository.stop_jobs(session, search_id, now=now)
    return search


def progress(search: SearchRecord, counts: dict[str, int]) -> float:
    """The share of the planned candidates that has ended (all of it once the search has)."""
    if search.status in ENDED:
        return 1.0
    ended = sum(counts.get(s, 0) for s in (JobStatus.SUCCEEDED, JobStatus.FAILED))
    ended += counts.get(JobStatus.CANCELLED, 0)
    planned = max(int(search.plan.get("n_configurations", 1)), 1)
    rungs = search.plan.get("rungs")
    if isinstance(rungs, list):
        planned = sum(int(r["candidates"]) for r in rungs)
    return min(0.99, ended / planned)
