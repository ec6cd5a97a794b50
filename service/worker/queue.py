"""The job row as a queue: every state change a worker makes, as guarded SQL.

Each function takes the caller's session and only executes and flushes; the worker wraps each
call in its own short transaction (:func:`service.db.session.transaction`). Every change of a
job a worker holds is an ``UPDATE … WHERE id = … AND status = 'running' AND lease_owner = …``
whose row count says whether the worker still held it: a job that was taken back (its lease
expired) or finished elsewhere is never overwritten.

The claim is one statement on both databases: ``UPDATE jobs … WHERE id = (SELECT id … LIMIT 1
FOR UPDATE SKIP LOCKED) AND status = 'queued'``. PostgreSQL skips rows other workers are
claiming; SQLite, which has no row locks (SQLAlchemy leaves the clause out), serialises
writers, and the repeated ``status = 'queued'`` makes a lost race a zero-row update. (A plain
read goes first, so polling an empty queue takes no write lock.) Taking jobs back after a crash,
a shutdown or an expired lease is in :mod:`service.worker.recovery`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, select, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import Session, aliased

from service.batch import repository as batches
from service.batch.finish import check_parts
from service.batch.outcome import BatchOutcome
from service.db.tables import JobRecord, JobStatus
from service.models import repository as models
from service.models.artifacts import verify_artifact
from service.searches import predictions
from service.store import DataStore, ObjectCorrupt
from service.worker.fit_process import JobSnapshot
from service.worker.lease import LeasePolicy
from service.worker.messages import StoredOutcome


def rowcount(result: Any) -> int:
    """Rows an ``UPDATE`` changed: 1 when a guarded transition happened, 0 when refused."""
    assert isinstance(result, CursorResult)
    return result.rowcount


def held_by(job_id: str, worker_id: str) -> ColumnElement[bool]:
    """The guard of every change a worker makes to a job it runs."""
    return and_(
        JobRecord.id == job_id,
        JobRecord.status == JobStatus.RUNNING,
        JobRecord.lease_owner == worker_id,
    )


# --- claiming ---------------------------------------------------------------------------------


def claim(
    session: Session, *, worker_id: str, now: datetime, policy: LeasePolicy
) -> JobRecord | None:
    """Take the oldest claimable queued job for ``worker_id``; ``None`` when there is none.

    Claimable: queued, not asked to cancel, and past its ``run_after``. The claim counts as an
    attempt and starts a lease of ``policy.lease``.
    """
    candidate = aliased(JobRecord, name="candidate")
    claimable = (
        select(candidate.id)
        .where(
            candidate.status == JobStatus.QUEUED,
            candidate.cancel_requested.is_(False),
            (candidate.run_after.is_(None)) | (candidate.run_after <= now),
        )
        .order_by(candidate.created_at, candidate.id)
        .limit(1)
    )
    # A plain read first: an idle worker polling an empty queue then takes no write lock
    # (SQLite has one for the whole file).
    if session.execute(claimable).first() is None:
        return None
    oldest = claimable.with_for_update(skip_locked=True).scalar_subquery()
    claimed = session.execute(
        update(JobRecord)
        .where(JobRecord.id == oldest, JobRecord.status == JobStatus.QUEUED)
        .values(
            status=JobStatus.RUNNING,
            lease_owner=worker_id,
            lease_expires_at=policy.expires_at(now),
            heartbeat_at=now,
            attempts=JobRecord.attempts + 1,
            started_at=now,
            progress=0.0,
            stage="starting",
            run_after=None,
        )
        .returning(JobRecord.id)
        .execution_options(synchronize_session=False)
    ).scalar_one_or_none()
    if claimed is None:
        return None
    return session.get(JobRecord, claimed, populate_existing=True)


# --- while a job runs -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Held:
    """The job is still this worker's; ``cancel_requested`` tells whether to stop it."""

    cancel_requested: bool


def touch(
    session: Session,
    job_id: str,
    worker_id: str,
    *,
    now: datetime,
    lease_expires_at: datetime | None = None,
    progress: tuple[float, str] | None = None,
) -> Held | None:
    """Renew the lease and/or record progress; ``None`` if the worker no longer holds the job."""
    values: dict[str, Any] = {}
    if lease_expires_at is not None:
        values.update(lease_expires_at=lease_expires_at, heartbeat_at=now)
    if progress is not None:
        values.update(progress=progress[0], stage=progress[1])
    if values:
        result = session.execute(
            update(JobRecord)
            .where(held_by(job_id, worker_id))
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        if rowcount(result) != 1:
            return None
    cancel = session.execute(
        select(JobRecord.cancel_requested).where(held_by(job_id, worker_id))
    ).scalar_one_or_none()
    return None if cancel is None else Held(cancel_requested=bool(cancel))


# --- ending a run -----------------------------------------------------------------------------


class ArtifactMismatch(Exception):
    """The artifact's object is missing, or its bytes do not match the checksum or size
    training reported."""


def finish_succeeded(
    session: Session,
    store: DataStore,
    job: JobSnapshot,
    worker_id: str,
    outcome: StoredOutcome,
    *,
    now: datetime,
) -> str | None:
    """Check the artifact's object, then add the model and mark the job succeeded, as one unit;
    returns the new model's id.

    The object is read through before any SQL runs (the session connects at its first
    statement, so no lock is held meanwhile). ``None`` when the job is no longer this worker's
    or a cancel was requested meanwhile: then nothing is written, and the object is the
    caller's to delete. The caller's transaction makes all of it atomic: a failure while
    adding the model, its artifact row or its importances leaves no trace and the job still
    running. Raises ``ArtifactMismatch``, or ``StoreUnavailable`` when the store is away.
    """
    try:
        verify_artifact(store, outcome.artifact)
        if outcome.out_of_fold is not None:
            verify_artifact(store, outcome.out_of_fold.stored)
    except ObjectCorrupt as error:
        raise ArtifactMismatch(error.detail) from None
    model_id = outcome.model_id
    # Updated first, so on PostgreSQL the row stays locked until the model rows are in.
    if not _succeed(session, job.id, worker_id, now=now, model_id=model_id):
        return None
    models.add_trained_model(
        session,
        model_id=model_id,
        job_id=job.id,
        name=job.name,
        dataset_id=job.dataset_id,
        method=job.method,
        task=job.task,
        target=job.target,
        features=outcome.features,
        classes=outcome.classes,
        params=outcome.resolved_params,
        encoding=outcome.encoding,
        metrics=outcome.metrics,
        curves=outcome.curves,
        n_estimators=outcome.n_estimators,
        artifact=outcome.artifact,
        importances=outcome.importances,
        created_at=now,
    )
    # A search's candidate keeps its held-out predictions for the stacked ensemble.
    if outcome.out_of_fold is not None:
        predictions.add(
            session,
            model_id=model_id,
            job_id=job.id,
            folds=int(job.validation.get("folds", 0)),
            kept=outcome.out_of_fold,
        )
    session.flush()
    return model_id


def finish_scored(
    session: Session,
    store: DataStore,
    job_id: str,
    worker_id: str,
    outcome: BatchOutcome,
    *,
    now: datetime,
) -> bool:
    """A batch prediction's end, as ``finish_succeeded`` is a fit's: check the output's parts,
    then name the output dataset and mark the job succeeded, as one unit (the caller's
    transaction), so a reader sees the whole output or none of it. False, with nothing
    written, when the job is no longer this worker's or a cancel arrived meanwhile (the parts
    are then the caller's to delete). Raises ``OutputMismatch`` or ``StoreUnavailable``.
    """
    check_parts(store, outcome)
    if not _succeed(session, job_id, worker_id, now=now):
        return False
    batches.record_output(session, job_id, outcome, now=now)
    return True


def _succeed(
    session: Session, job_id: str, worker_id: str, *, now: datetime, model_id: str | None = None
) -> bool:
    """Mark a held job succeeded unless a cancel was asked for; whether it was."""
    result = session.execute(
        update(JobRecord)
        .where(held_by(job_id, worker_id), JobRecord.cancel_requested.is_(False))
        .values(
            status=JobStatus.SUCCEEDED,
            progress=1.0,
            stage="done",
            model_id=model_id,
            finished_at=now,
            lease_expires_at=None,
            error_code=None,
            error_message=None,
        )
        .execution_options(synchronize_session=False)
    )
    return rowcount(result) == 1


def record_resources(session: Session, job_id: str, resources: Mapping[str, Any] | None) -> None:
    """Keep what the ended fit cost on its job (in the transaction that ended it)."""
    if resources is None:
        return
    session.execute(
        update(JobRecord)
        .where(JobRecord.id == job_id)
        .values(resources=dict(resources))
        .execution_options(synchronize_session=False)
    )


def finish(
    session: Session,
    job_id: str,
    worker_id: str,
    status: JobStatus,
    *,
    now: datetime,
    error: tuple[str, str] | None = None,
) -> bool:
    """End a held job as ``cancelled`` or ``failed`` (with ``error = (code, message)``)."""
    code, message = error if error is not None else (None, None)
    result = session.execute(
        update(JobRecord)
        .where(held_by(job_id, worker_id))
        .values(
            status=status,
            finished_at=now,
            lease_expires_at=None,
            error_code=code,
            error_message=message,
            stage="cancelled" if status == JobStatus.CANCELLED else "failed",
        )
        .execution_options(synchronize_session=False)
    )
    return rowcount(result) == 1
