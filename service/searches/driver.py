"""Moving searches on: every worker calls :func:`advance_searches` from its claim loop.

A search has no process of its own. Whichever worker looks next does the step that is due,
under a guarded update so that exactly one does it: stop the candidates once the deadline
has passed; queue halving's next rung once a rung has ended; and once every candidate has
ended, build the stacked ensemble, rank, register the best model and end the search. A worker
that dies in the last step leaves the search ``stacking``; after ``STACKING_LEASE`` another
takes it over, so, like a candidate whose worker dies, no search is ever stranded.

The last step (loading the members' out-of-fold predictions, fitting the final estimator,
storing the ensemble) takes seconds on a large search, so the claim loop hands it to a thread
of its own (``run``) rather than stop claiming and reaping meanwhile.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from service.db.session import reading, transaction
from service.db.tables import (
    JobRecord,
    JobStatus,
    SearchCandidateRecord,
    SearchRecord,
    SearchStatus,
    new_id,
)
from service.db.types import utc_now
from service.jobs import repository as job_repository
from service.models import repository as model_repository
from service.models.artifacts import delete_objects, write_artifact
from service.searches import leaderboard, planner, queueing, registration, repository, stacking
from service.store import DataStore, StoredObject

logger = logging.getLogger(__name__)

STACKING_LEASE = timedelta(minutes=10)

#: Runs a search's last step: at once (the default) or handed to another thread.
Run = Callable[[Callable[[], None]], object]


def _at_once(step: Callable[[], None]) -> None:
    step()


def advance_searches(db_engine: Engine, store: DataStore, run: Run = _at_once) -> None:
    """Do every step that is due on every running search (cheap when none is); the last step
    of a search whose candidates have all ended goes to ``run``."""
    with reading(db_engine) as session:
        search_ids = repository.active_ids(session)
    for search_id in search_ids:
        try:
            if _advance(db_engine, search_id):
                run(functools.partial(_finish_logged, db_engine, store, search_id))
        except Exception:
            logger.exception("search %s: could not move it on; will try again", search_id)


def _advance(db_engine: Engine, search_id: str) -> bool:
    """Do what is due on one search; True once this worker has claimed its last step."""
    now = utc_now()
    with transaction(db_engine) as session:
        search = repository.get(session, search_id)
        if search is None:
            return False
        if search.status == SearchStatus.RUNNING and not _candidates_ended(session, search, now):
            return False
        return repository.claim_stacking(session, search_id, now=now, stale=now - STACKING_LEASE)


def _finish_logged(db_engine: Engine, store: DataStore, search_id: str) -> None:
    try:
        _finish(db_engine, store, search_id)
    except Exception:
        # The search stays `stacking`; its lease lapses and a worker takes it over.
        logger.exception("search %s: could not end it; will try again", search_id)


def _candidates_ended(session: Session, search: SearchRecord, now: datetime) -> bool:
    """Whether every candidate has ended; queues halving's next rung when a rung has."""
    past_deadline = search.deadline_at is not None and now >= search.deadline_at
    # The usual case, every second of a search's life: a cheap probe, nothing loaded.
    if repository.has_active_jobs(session, search.id):
        if past_deadline:
            repository.stop_jobs(session, search.id, now=now)
        return False
    rows = repository.candidates(session, search.id)
    rungs = search.plan.get("rungs") or []
    if search.strategy != "halving" or search.rung >= len(rungs) - 1 or past_deadline:
        return True
    this_rung = [(c, job, model) for c, job, model in rows if c.rung == search.rung]
    ranked = leaderboard.entries(this_rung, search.metric)
    if not ranked:
        return True
    if not repository.claim_rung(session, search.id, search.rung):
        return False
    kept = ranked[: planner.survivors(len(ranked))]
    rung = search.rung + 1
    last = rung == len(rungs) - 1
    queueing.queue_again(
        session,
        search,
        [(entry.candidate, entry.job) for entry in kept],
        rung=rung,
        rows=None if last else int(rungs[rung]["rows"]),
    )
    logger.info("search %s: rung %d with %d candidates", search.id, rung, len(kept))
    return False


def _finish(db_engine: Engine, store: DataStore, search_id: str) -> None:
    """Stack, rank, register and end a search this worker has claimed."""
    notes: list[str] = []
    built = None
    stored: StoredObject | None = None
    stack_model_id = new_id()
    with reading(db_engine) as session:
        search = repository.get(session, search_id)
        assert search is not None
        ranked = leaderboard.entries(repository.candidates(session, search_id), search.metric)
        if search.stack and ranked:
            try:
                built = stacking.build(session, store, search, ranked)
                # Bytes first, row after: the ensemble's artifact is in the store before the
                # transaction that names it (a crash in between leaves it to store gc).
                stored = write_artifact(store, stack_model_id, built.artifact)
            except stacking.StackingSkipped as skipped:
                notes.append(str(skipped))
            except Exception as error:  # an ensemble is a bonus: the search still ends
                logger.exception("search %s: stacking failed", search_id)
                notes.append(f"no ensemble: stacking failed ({type(error).__name__}: {error})")
    now = utc_now()
    with transaction(db_engine) as session:
        search = repository.get(session, search_id)
        if search is None or search.status != SearchStatus.STACKING:
            if stored is not None:
                delete_objects(store, [stored.path])
            return  # cancelled meanwhile
        stack_id = None
        if built is not None and stored is not None:
            stack_id = _store_stack(session, search, built, stack_model_id, stored, now)
        candidates = repository.candidates(session, search_id)
        ranked = leaderboard.entries(candidates, search.metric)
        best = ranked[0].model.id if ranked else None
        if best is None:
            notes.append(_why_none_succeeded([job for _, job, _ in candidates]))
        registered = search.registration
        if search.register_as and best is not None:
            registered = registration.register(session, search.register_as, best)
        elif search.register_as:
            registered = {
                "status": "failed",
                "name": search.register_as,
                "detail": "no candidate succeeded",
            }
        repository.transition(
            session,
            search_id,
            from_statuses=(SearchStatus.STACKING,),
            status=SearchStatus.SUCCEEDED if best else SearchStatus.FAILED,
            best_model_id=best,
            stack_model_id=stack_id,
            registration=registered,
            notes=[*search.notes, *notes],
            finished_at=now,
        )
    logger.info("search %s: ended; best model %s", search_id, best)


def _why_none_succeeded(jobs: list[JobRecord]) -> str:
    """The note a failed search carries: how its candidates ended, and the first failure's
    error (candidates of one search usually fail alike: a bad target, too few rows)."""
    ended = Counter(str(job.status) for job in jobs)
    counts = ", ".join(f"{n} {status}" for status, n in sorted(ended.items())) or "none ran"
    failed = next((job for job in jobs if job.status == JobStatus.FAILED), None)
    if failed is None:
        return f"no candidate succeeded ({counts})"
    reason = f"{failed.error_code or 'failed'}: {failed.error_message or 'no message'}"
    return f"no candidate succeeded ({counts}); the first failure, job {failed.id}: {reason}"


def _store_stack(
    session: Session,
    search: SearchRecord,
    built: stacking.BuiltStack,
    model_id: str,
    artifact: StoredObject,
    now: datetime,
) -> str:
    """The ensemble as a job (recorded as succeeded, never queued), a model and the row that
    names its artifact (already in the store, under the model's id)."""
    first = built.members[0]
    job_id = new_id()
    params = {
        "members": [{"model_id": m.id, "method": m.method} for m in built.members],
        "final_estimator": built.final_estimator,
    }
    name = f"{search.name or f'search {search.id[:8]}'}: stacked ensemble"
    job_repository.add(
        session,
        JobRecord(
            id=job_id,
            name=name,
            dataset_id=search.dataset_id,
            method="stacking",
            task=search.task,
            target=search.target,
            features=list(search.features),
            params=params,
            validation={"folds": search.folds},
            seed=search.seed,
            status=JobStatus.SUCCEEDED,
            progress=1.0,
            stage="done",
            attempts=1,
            max_attempts=1,
            cancel_requested=False,
            created_at=search.stacking_started_at or now,
            started_at=search.stacking_started_at or now,
            finished_at=now,
            model_id=model_id,
            search_id=search.id,
        ),
    )
    model_repository.add_trained_model(
        session,
        model_id=model_id,
        job_id=job_id,
        name=name,
        dataset_id=search.dataset_id,
        method="stacking",
        task=search.task,
        target=search.target,
        features=list(first.features),
        classes=first.classes,
        params=params,
        encoding=first.encoding,
        metrics=built.metrics,
        curves=None,
        n_estimators=len(built.members),
        artifact=artifact,
        created_at=now,
    )
    repository.add(
        session,
        SearchCandidateRecord(
            job_id=job_id,
            search_id=search.id,
            config_index=-1,
            rung=search.rung,
            n_rows=None,
            kind="stack",
        ),
    )
    return model_id
