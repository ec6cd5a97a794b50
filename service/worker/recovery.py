"""Taking jobs back: after a crashed fit, a shutdown, or a worker that stopped renewing its lease.

Same rules as :mod:`service.worker.queue`: the caller's session, guarded updates, no commit.
A job taken back is queued again (after a back-off, see :class:`LeasePolicy`), failed when it
has used up its attempts, or cancelled when a cancel was requested meanwhile.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from service.db.tables import JobRecord, JobStatus
from service.worker.lease import LeasePolicy
from service.worker.queue import held_by, rowcount


def retry_or_fail(
    session: Session,
    job_id: str,
    worker_id: str,
    *,
    now: datetime,
    policy: LeasePolicy,
    code: str,
    reason: str,
) -> JobStatus | None:
    """A held run ended without a verdict (a crash): queue it again, or fail if out of attempts.

    A cancel request wins over both. Returns the new status, ``None`` if the job was not held.
    """
    row = session.execute(
        select(JobRecord.attempts, JobRecord.max_attempts, JobRecord.cancel_requested)
        .where(held_by(job_id, worker_id))
        .with_for_update()
    ).one_or_none()
    if row is None:
        return None
    values = _after_lost_run(row.attempts, row.max_attempts, row.cancel_requested, now, policy)
    if values["status"] == JobStatus.FAILED:
        values.update(
            error_code=code,
            error_message=f"{reason}; tried {row.attempts} of {row.max_attempts} times, "
            "so the job is not retried.",
        )
    elif values["status"] == JobStatus.QUEUED:
        values["stage"] = f"queued again: {reason}"
    result = session.execute(
        update(JobRecord)
        .where(held_by(job_id, worker_id))
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    return values["status"] if rowcount(result) == 1 else None


def requeue_for_shutdown(session: Session, job_id: str, worker_id: str) -> bool:
    """Give back a held job whose worker is shutting down; the interrupted run is not counted."""
    result = session.execute(
        update(JobRecord)
        .where(held_by(job_id, worker_id))
        .values(
            status=JobStatus.QUEUED,
            # A claim counted the run, so a held job has attempts >= 1.
            attempts=JobRecord.attempts - 1,
            lease_owner=None,
            lease_expires_at=None,
            run_after=None,
            progress=0.0,
            stage="queued again: the worker shut down",
        )
        .execution_options(synchronize_session=False)
    )
    return rowcount(result) == 1


def _after_lost_run(
    attempts: int, max_attempts: int, cancel_requested: bool, now: datetime, policy: LeasePolicy
) -> dict[str, Any]:
    if cancel_requested:
        return {"status": JobStatus.CANCELLED, "finished_at": now, "lease_expires_at": None}
    if attempts < max_attempts:
        return {
            "status": JobStatus.QUEUED,
            "run_after": policy.retry_at(now, attempts),
            "lease_owner": None,
            "lease_expires_at": None,
            "progress": 0.0,
        }
    return {"status": JobStatus.FAILED, "finished_at": now, "lease_expires_at": None}


def cancel_requested_queued(session: Session, *, now: datetime) -> int:
    """End queued jobs that were asked to cancel; the claim skips them, so nothing else would.

    The API cancels a queued job at once; this catches a job that was queued again (by a
    shutdown) just as a cancel for its run arrived.
    """
    waiting = select(JobRecord.id).where(
        JobRecord.status == JobStatus.QUEUED, JobRecord.cancel_requested.is_(True)
    )
    if session.execute(waiting.limit(1)).first() is None:
        return 0  # the usual case, answered without a write lock
    result = session.execute(
        update(JobRecord)
        .where(JobRecord.status == JobStatus.QUEUED, JobRecord.cancel_requested.is_(True))
        .values(
            status=JobStatus.CANCELLED, finished_at=now, stage="cancelled", lease_expires_at=None
        )
        .execution_options(synchronize_session=False)
    )
    return rowcount(result)


def reap_expired(
    session: Session, *, now: datetime, policy: LeasePolicy, limit: int = 100
) -> list[tuple[str, JobStatus]]:
    """Take back running jobs whose lease has expired: their worker died or lost the database.

    Each is queued again (with back-off), failed when out of attempts, or cancelled when a
    cancel was requested. Returns ``(job id, new status)`` for each job taken back.
    """
    expired = session.execute(
        select(
            JobRecord.id,
            JobRecord.attempts,
            JobRecord.max_attempts,
            JobRecord.cancel_requested,
            JobRecord.lease_owner,
        )
        .where(JobRecord.status == JobStatus.RUNNING, JobRecord.lease_expires_at < now)
        .order_by(JobRecord.lease_expires_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()
    reaped = []
    for row in expired:
        values = _after_lost_run(row.attempts, row.max_attempts, row.cancel_requested, now, policy)
        reason = f"its worker ({row.lease_owner}) stopped renewing the lease"
        if values["status"] == JobStatus.FAILED:
            values.update(
                error_code="worker_lost",
                error_message=f"The job's worker stopped responding ({reason}); tried "
                f"{row.attempts} of {row.max_attempts} times, so the job is not retried.",
            )
        elif values["status"] == JobStatus.QUEUED:
            values["stage"] = f"queued again: {reason}"
        result = session.execute(
            update(JobRecord)
            .where(
                JobRecord.id == row.id,
                JobRecord.status == JobStatus.RUNNING,
                JobRecord.lease_expires_at < now,
            )
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        if rowcount(result) == 1:
            reaped.append((row.id, values["status"]))
    return reaped
