"""The queue's SQL on SQLite and PostgreSQL: claim, lease, reaper, guarded and atomic ends."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session
from worker_helpers import FAST_POLICY, add_dataset, add_job, get_job
from worker_standins import make_outcome

from service.db.session import create_db_engine, transaction
from service.db.tables import (
    ImportanceRecord,
    JobRecord,
    JobStatus,
    ModelArtifactRecord,
    ModelRecord,
)
from service.db.types import utc_now
from service.models import artifacts
from service.store import DataStore, ObjectCorrupt
from service.worker import queue, recovery
from service.worker.fit_process import JobSnapshot, store_outcome


def _claim(engine: Engine, worker_id: str, *, now_offset: float = 0.0) -> JobRecord | None:
    now = utc_now() + timedelta(seconds=now_offset)
    with transaction(engine) as session:
        return queue.claim(session, worker_id=worker_id, now=now, policy=FAST_POLICY)


def test_two_claimers_one_job_exactly_one_wins(engine: Engine, database_url: str) -> None:
    job_id = add_job(engine, add_dataset(engine))
    barrier = threading.Barrier(2)
    results: dict[str, JobRecord | None] = {}

    def claimer(name: str) -> None:
        own_engine = create_db_engine(database_url)  # separate connections, as two workers
        try:
            barrier.wait()
            results[name] = _claim(own_engine, name)
        finally:
            own_engine.dispose()

    threads = [threading.Thread(target=claimer, args=(name,)) for name in ("w1", "w2")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    winners = [name for name, job in results.items() if job is not None]
    assert len(winners) == 1
    job = get_job(engine, job_id)
    assert (job.status, job.lease_owner, job.attempts) == ("running", winners[0], 1)
    assert job.started_at is not None and job.lease_expires_at is not None


def test_claim_takes_oldest_due_job_and_skips_cancel_requested(engine: Engine) -> None:
    dataset_id = add_dataset(engine)
    cancelled = add_job(engine, dataset_id)
    later = add_job(engine, dataset_id)
    ready = add_job(engine, dataset_id)
    with Session(engine) as session, session.begin():
        session.get_one(JobRecord, cancelled).cancel_requested = True
        session.get_one(JobRecord, later).run_after = utc_now() + timedelta(minutes=1)

    first = _claim(engine, "w")
    assert first is not None and first.id == ready
    assert _claim(engine, "w") is None
    second = _claim(engine, "w", now_offset=120)
    assert second is not None and second.id == later


def test_heartbeat_extends_the_lease_only_for_its_holder(engine: Engine) -> None:
    job_id = add_job(engine, add_dataset(engine))
    claimed = _claim(engine, "w")
    assert claimed is not None and claimed.lease_expires_at is not None
    later = claimed.lease_expires_at + timedelta(minutes=5)

    with transaction(engine) as session:
        held = queue.touch(
            session, job_id, "w", now=utc_now(), lease_expires_at=later, progress=(0.4, "tree 4/10")
        )
    assert held == queue.Held(cancel_requested=False)
    job = get_job(engine, job_id)
    assert job.lease_expires_at == later
    assert (job.progress, job.stage) == (0.4, "tree 4/10")

    with transaction(engine) as session:
        assert (
            queue.touch(session, job_id, "intruder", now=utc_now(), lease_expires_at=later) is None
        )
        assert not queue.finish(session, job_id, "intruder", JobStatus.FAILED, now=utc_now())
    assert get_job(engine, job_id).status == "running"


def test_expired_lease_is_requeued_then_failed_when_out_of_attempts(engine: Engine) -> None:
    job_id = add_job(engine, add_dataset(engine), max_attempts=2)
    lapse = FAST_POLICY.lease.total_seconds() + 1

    assert _claim(engine, "dead-1") is not None
    with transaction(engine) as session:
        # A live lease is left alone.
        assert recovery.reap_expired(session, now=utc_now(), policy=FAST_POLICY) == []
    with transaction(engine) as session:
        reaped = recovery.reap_expired(
            session, now=utc_now() + timedelta(seconds=lapse), policy=FAST_POLICY
        )
    assert reaped == [(job_id, JobStatus.QUEUED)]
    job = get_job(engine, job_id)
    assert (job.status, job.attempts, job.lease_owner) == ("queued", 1, None)
    assert job.run_after is not None and "dead-1" in (job.stage or "")

    claimed = _claim(engine, "dead-2", now_offset=lapse)
    assert claimed is not None and claimed.attempts == 2
    with transaction(engine) as session:
        reaped = recovery.reap_expired(
            session, now=utc_now() + timedelta(seconds=2 * lapse + 1), policy=FAST_POLICY
        )
    assert reaped == [(job_id, JobStatus.FAILED)]
    job = get_job(engine, job_id)
    assert (job.status, job.attempts, job.error_code) == ("failed", 2, "worker_lost")
    assert "stopped responding" in (job.error_message or "")
    assert job.finished_at is not None


def test_expired_lease_with_cancel_requested_ends_cancelled(engine: Engine) -> None:
    job_id = add_job(engine, add_dataset(engine))
    assert _claim(engine, "dead") is not None
    with Session(engine) as session, session.begin():
        session.get_one(JobRecord, job_id).cancel_requested = True
    with transaction(engine) as session:
        later = utc_now() + timedelta(minutes=1)
        assert recovery.reap_expired(session, now=later, policy=FAST_POLICY) == [
            (job_id, JobStatus.CANCELLED)
        ]


def _counts(engine: Engine) -> tuple[int, int, int]:
    with Session(engine) as session:
        return tuple(  # type: ignore[return-value]
            session.scalar(select(func.count()).select_from(table)) or 0
            for table in (ModelRecord, ModelArtifactRecord, ImportanceRecord)
        )


def test_success_writes_model_artifact_and_job_atomically(
    engine: Engine, data_store: DataStore
) -> None:
    job_id = add_job(engine, add_dataset(engine))
    claimed = _claim(engine, "w")
    assert claimed is not None
    snapshot = JobSnapshot.of(claimed, n_jobs=1)
    trained = make_outcome(snapshot)
    good = store_outcome(data_store, trained)  # as the fit process does: bytes first
    # A set is not JSON: the importances fail to insert after the job row and model are written.
    broken = replace(good, importances={"impurity": [{"name": "x", "importance": {1, 2}}]})

    with pytest.raises(Exception), transaction(engine) as session:  # noqa: B017
        queue.finish_succeeded(session, data_store, snapshot, "w", broken, now=utc_now())
    assert _counts(engine) == (0, 0, 0)
    job = get_job(engine, job_id)
    assert (job.status, job.model_id) == ("running", None)

    with transaction(engine) as session:
        model_id = queue.finish_succeeded(session, data_store, snapshot, "w", good, now=utc_now())
    assert model_id == good.model_id
    job = get_job(engine, job_id)
    assert (job.status, job.progress, job.model_id) == ("succeeded", 1.0, model_id)
    assert job.finished_at is not None
    with Session(engine) as session:
        artifact = session.get_one(ModelArtifactRecord, model_id)
        assert (artifact.path, artifact.size_bytes, artifact.sha256) == (
            f"models/{model_id}/model.cpm",
            len(trained.artifact),
            trained.sha256,
        )
        model = session.get_one(ModelRecord, model_id)
        assert (model.job_id, model.method, model.size_bytes) == (job_id, "standin", trained.size)
    assert data_store.get(good.artifact) == trained.artifact
    assert _counts(engine) == (1, 1, 1)


def test_success_after_a_cancel_request_writes_nothing(
    engine: Engine, data_store: DataStore
) -> None:
    job_id = add_job(engine, add_dataset(engine))
    claimed = _claim(engine, "w")
    assert claimed is not None
    with Session(engine) as session, session.begin():
        session.get_one(JobRecord, job_id).cancel_requested = True
    snapshot = JobSnapshot.of(claimed, n_jobs=1)
    outcome = store_outcome(data_store, make_outcome(snapshot))
    with transaction(engine) as session:
        finished = queue.finish_succeeded(
            session, data_store, snapshot, "w", outcome, now=utc_now()
        )
    assert finished is None
    assert _counts(engine) == (0, 0, 0)


@pytest.mark.parametrize("damage", ["changed", "missing"])
def test_corrupt_or_missing_artifact_is_refused_naming_the_object(
    engine: Engine, data_store: DataStore, damage: str
) -> None:
    add_job(engine, add_dataset(engine))
    claimed = _claim(engine, "w")
    assert claimed is not None
    snapshot = JobSnapshot.of(claimed, n_jobs=1)
    outcome = store_outcome(data_store, make_outcome(snapshot))
    if damage == "changed":
        data_store.put(outcome.artifact.path, b"not the bytes the fit wrote")
    else:
        data_store.delete(outcome.artifact.path)
    with (
        pytest.raises(queue.ArtifactMismatch, match=outcome.artifact.path),
        transaction(engine) as session,
    ):
        queue.finish_succeeded(session, data_store, snapshot, "w", outcome, now=utc_now())
    assert _counts(engine) == (0, 0, 0)


@pytest.mark.parametrize("change", ["same size", "longer", "shorter"])
def test_a_large_artifact_is_checked_by_size_then_by_every_read(
    engine: Engine, data_store: DataStore, change: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every artifact counts as large: it is not read through after the fit.
    monkeypatch.setattr(artifacts, "FULL_CHECK_BYTES", 0)
    add_job(engine, add_dataset(engine))
    claimed = _claim(engine, "w")
    assert claimed is not None
    snapshot = JobSnapshot.of(claimed, n_jobs=1)
    outcome = store_outcome(data_store, make_outcome(snapshot))
    written = data_store.get(outcome.artifact)
    damaged = bytearray(written)
    damaged[-1] ^= 0xFF
    if change == "longer":
        damaged += b"!"
    elif change == "shorter":
        del damaged[-1]
    data_store.put(outcome.artifact.path, damaged)
    if change != "same size":
        with (
            pytest.raises(queue.ArtifactMismatch, match=outcome.artifact.path),
            transaction(engine) as session,
        ):
            queue.finish_succeeded(session, data_store, snapshot, "w", outcome, now=utc_now())
        assert _counts(engine) == (0, 0, 0)
        return
    with transaction(engine) as session:
        model_id = queue.finish_succeeded(
            session, data_store, snapshot, "w", outcome, now=utc_now()
        )
    assert model_id is not None
    # Named, but never loaded as a model: every read checks the SHA-256 and names the object.
    with pytest.raises(ObjectCorrupt, match=outcome.artifact.path):
        artifacts.read_artifact(data_store, outcome.artifact)


def test_shutdown_requeue_does_not_count_the_interrupted_run(engine: Engine) -> None:
    job_id = add_job(engine, add_dataset(engine))
    assert _claim(engine, "w") is not None
    with transaction(engine) as session:
        assert recovery.requeue_for_shutdown(session, job_id, "w")
    job = get_job(engine, job_id)
    assert (job.status, job.attempts, job.lease_owner, job.lease_expires_at) == (
        "queued",
        0,
        None,
        None,
    )


def test_a_requeued_job_with_a_cancel_request_is_swept_to_cancelled(engine: Engine) -> None:
    job_id = add_job(engine, add_dataset(engine))
    assert _claim(engine, "w") is not None
    with Session(engine) as session, session.begin():
        session.get_one(JobRecord, job_id).cancel_requested = True
    with transaction(engine) as session:
        assert recovery.requeue_for_shutdown(session, job_id, "w")
    assert _claim(engine, "other") is None

    with transaction(engine) as session:
        assert recovery.cancel_requested_queued(session, now=utc_now()) == 1
    job = get_job(engine, job_id)
    assert (job.status, job.finished_at is not None) == ("cancelled", True)
