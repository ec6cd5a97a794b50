"""A worker with real fit processes on a SQLite file: every way a run can end."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session
from worker_helpers import add_dataset, add_job, ended, fast_config, get_job, wait_for
from worker_standins import standin

from engine import load_model
from service.db.session import create_db_engine
from service.db.tables import JobRecord, ModelArtifactRecord
from service.db.types import utc_now
from service.models import repository as models
from service.models.artifacts import read_artifact
from service.store import DataStore, StoredObject
from service.worker import queue
from service.worker.claim_loop import Supervisor


@pytest.fixture
def sqlite_engine(sqlite_url: str) -> Iterator[Engine]:
    db_engine = create_db_engine(sqlite_url)
    yield db_engine
    db_engine.dispose()


# The worker fixture's stop grace: how long a fit asked to stop may take before it is killed.
STOP_GRACE = 2.0


@pytest.fixture
def worker(sqlite_url: str, store_url: str) -> Iterator[Supervisor]:
    config = fast_config(store_url, shutdown_grace_seconds=STOP_GRACE)
    supervisor = Supervisor(sqlite_url, config, train=standin, worker_id="test-worker")
    supervisor.start()
    yield supervisor
    supervisor.stop(grace=0)


def _pid_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # A killed child of this worker stays a zombie until reaped; /proc tells them apart.
        status = Path(f"/proc/{pid}/status")
        if status.exists() and "zombie" in status.read_text():
            return True
        time.sleep(0.05)
    return False


def _read_pid(path: Path, timeout: float = 20.0) -> int:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < deadline, "the fit never started"
        time.sleep(0.05)
    return int(path.read_text())


def test_success_stores_the_model(
    sqlite_engine: Engine, worker: Supervisor, store_url: str
) -> None:
    job_id = add_job(sqlite_engine, add_dataset(sqlite_engine))

    job = wait_for(sqlite_engine, job_id, ended)

    assert (job.status, job.progress, job.attempts, job.stage) == ("succeeded", 1.0, 1, "done")
    assert job.model_id is not None and job.finished_at is not None
    with Session(sqlite_engine) as session:
        artifact = session.get_one(ModelArtifactRecord, job.model_id)
    stored = StoredObject(artifact.path, artifact.size_bytes, artifact.sha256)
    assert artifact.path == f"models/{job.model_id}/model.cpm"
    assert DataStore(store_url).get(stored) == b"fitted-model-bytes"


def test_training_error_fails_at_once(sqlite_engine: Engine, worker: Supervisor) -> None:
    job_id = add_job(sqlite_engine, add_dataset(sqlite_engine), behaviour="fail")

    job = wait_for(sqlite_engine, job_id, ended)

    assert (job.status, job.attempts, job.error_code) == ("failed", 1, "invalid_params")
    assert job.error_message == "max_depth must be at least 1 for this data."


def test_killed_fit_is_retried_and_then_succeeds(
    sqlite_engine: Engine, worker: Supervisor, tmp_path: Path
) -> None:
    job_id = add_job(
        sqlite_engine,
        add_dataset(sqlite_engine),
        behaviour="crash_once",
        marker=str(tmp_path / "crashed"),
    )

    job = wait_for(sqlite_engine, job_id, ended)

    assert (job.status, job.attempts) == ("succeeded", 2)


def test_fit_killed_every_time_fails_with_the_reason(
    sqlite_engine: Engine, worker: Supervisor
) -> None:
    job_id = add_job(sqlite_engine, add_dataset(sqlite_engine), max_attempts=2, behaviour="crash")

    job = wait_for(sqlite_engine, job_id, ended)

    assert (job.status, job.attempts, job.error_code) == ("failed", 2, "training_crashed")
    assert "killed by signal 9 (SIGKILL" in (job.error_message or "")
    assert "tried 2 of 2 times" in (job.error_message or "")


def test_a_fit_killed_outright_leaves_no_process_behind(
    sqlite_engine: Engine, worker: Supervisor, tmp_path: Path
) -> None:
    # As a fit with n_jobs > 1 that the OOM killer ends: its engine workers are orphaned.
    pidfile = tmp_path / "pid"
    dataset = add_dataset(sqlite_engine)
    job_id = add_job(
        sqlite_engine, dataset, max_attempts=1, behaviour="crash", pidfile=f"{pidfile}"
    )

    job = wait_for(sqlite_engine, job_id, ended)

    assert (job.status, job.error_code) == ("failed", "training_crashed")
    assert _pid_gone(_read_pid(Path(f"{pidfile}.child"))), "the dead fit's child lives on"


def test_a_model_finished_while_the_database_is_away_is_stored_when_it_returns(
    sqlite_engine: Engine, worker: Supervisor, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = queue.finish_succeeded
    calls = []

    def database_away_twice(*args: Any, **kwargs: Any) -> str | None:
        calls.append(time.monotonic())
        if len(calls) <= 2:
            raise OperationalError("COMMIT", {}, ConnectionError("server closed the connection"))
        return store(*args, **kwargs)

    monkeypatch.setattr(queue, "finish_succeeded", database_away_twice)
    job_id = add_job(sqlite_engine, add_dataset(sqlite_engine))

    job = wait_for(sqlite_engine, job_id, ended)

    # The same run's model, not a second training: one attempt, stored on the third try.
    assert (job.status, job.attempts, len(calls)) == ("succeeded", 1, 3)
    assert job.model_id is not None


def test_unexpected_error_is_retried_then_fails(sqlite_engine: Engine, worker: Supervisor) -> None:
    job_id = add_job(sqlite_engine, add_dataset(sqlite_engine), max_attempts=2, behaviour="raise")

    job = wait_for(sqlite_engine, job_id, ended)

    assert (job.status, job.attempts, job.error_code) == ("failed", 2, "training_error")
    assert "RuntimeError: an unexpected bug" in (job.error_message or "")


@pytest.mark.parametrize("behaviour", ["sleep", "ignore_stop"])
def test_cancel_stops_the_fit_within_seconds(
    sqlite_engine: Engine, worker: Supervisor, tmp_path: Path, behaviour: str
) -> None:
    pidfile = tmp_path / "pid"
    job_id = add_job(
        sqlite_engine,
        add_dataset(sqlite_engine),
        behaviour=behaviour,
        seconds=60,
        pidfile=str(pidfile),
    )
    pid = _read_pid(pidfile)
    wait_for(sqlite_engine, job_id, lambda job: job.progress > 0)

    with Session(sqlite_engine) as session, session.begin():
        session.get_one(JobRecord, job_id).cancel_requested = True
    asked = time.monotonic()
    job = wait_for(sqlite_engine, job_id, ended, timeout=45)

    # A fit that ignores the stop request is killed after the stop grace (2 s), not left to
    # run its 60 s; the margin is for a loaded machine.
    assert time.monotonic() - asked < STOP_GRACE + 40
    assert (job.status, job.model_id, job.attempts) == ("cancelled", None, 1)
    assert _pid_gone(pid)
    if behaviour == "ignore_stop":
        assert _pid_gone(_read_pid(Path(f"{pidfile}.child"))), "the fit's own child survived"


def test_shutdown_requeues_an_unfinished_job(
    sqlite_engine: Engine, sqlite_url: str, store_url: str, tmp_path: Path
) -> None:
    supervisor = Supervisor(sqlite_url, fast_config(store_url), train=standin, worker_id="leaving")
    supervisor.start()
    pidfile = tmp_path / "pid"
    job_id = add_job(
        sqlite_engine,
        add_dataset(sqlite_engine),
        behaviour="sleep",
        seconds=60,
        pidfile=str(pidfile),
    )
    pid = _read_pid(pidfile)

    supervisor.stop(grace=0.5)

    job = get_job(sqlite_engine, job_id)
    assert (job.status, job.attempts, job.lease_owner, job.lease_expires_at) == (
        "queued",
        0,
        None,
        None,
    )
    assert _pid_gone(pid)


def test_shutdown_lets_a_short_fit_finish(
    sqlite_engine: Engine, sqlite_url: str, store_url: str
) -> None:
    supervisor = Supervisor(sqlite_url, fast_config(store_url), train=standin)
    supervisor.start()
    job_id = add_job(sqlite_engine, add_dataset(sqlite_engine), behaviour="sleep", seconds=1.5)
    wait_for(sqlite_engine, job_id, lambda job: job.status == "running")

    supervisor.stop(grace=20)

    assert get_job(sqlite_engine, job_id).status == "succeeded"


def test_a_job_taken_back_from_its_worker_is_not_overwritten(
    sqlite_engine: Engine, worker: Supervisor, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    job_id = add_job(
        sqlite_engine,
        add_dataset(sqlite_engine),
        behaviour="sleep",
        seconds=60,
        pidfile=str(pidfile),
    )
    pid = _read_pid(pidfile)
    # As if the lease had lapsed and another worker had requeued the job.
    with Session(sqlite_engine) as session, session.begin():
        job = session.get_one(JobRecord, job_id)
        job.status, job.lease_owner = "queued", None
        # Keeps the test's own worker from claiming it again.
        job.run_after = utc_now() + timedelta(hours=1)

    assert _pid_gone(pid)
    time.sleep(0.5)
    assert get_job(sqlite_engine, job_id).status == "queued"


def test_a_real_engine_fit_with_its_own_worker_processes(
    sqlite_engine: Engine, sqlite_url: str, store_url: str
) -> None:
    config = fast_config(store_url, processes_per_job=2)
    supervisor = Supervisor(sqlite_url, config, train=standin)
    supervisor.start()
    try:
        job_id = add_job(sqlite_engine, add_dataset(sqlite_engine), behaviour="forest")
        job = wait_for(sqlite_engine, job_id, ended)
    finally:
        supervisor.stop(grace=0)

    assert job.status == "succeeded", job.error_message
    with Session(sqlite_engine) as session:
        stored = models.artifact(session, job.model_id)
    assert stored is not None
    model = load_model(read_artifact(DataStore(store_url), stored))
    assert model.predict(np.arange(3, dtype=np.float64).reshape(-1, 1)).shape == (3,)


def test_the_production_training_function_end_to_end(
    sqlite_engine: Engine, sqlite_url: str, store_url: str
) -> None:
    supervisor = Supervisor(
        sqlite_url, fast_config(store_url, processes_per_job=2)
    )  # default_train
    supervisor.start()
    try:
        dataset_id = add_dataset(sqlite_engine)
        job_id = add_job(sqlite_engine, dataset_id)
        with Session(sqlite_engine) as session, session.begin():
            job = session.get_one(JobRecord, job_id)
            job.method, job.params = "random_forest", {"n_estimators": 6}
            job.validation = {"holdout": 0.2}
        job = wait_for(sqlite_engine, job_id, ended, timeout=60)
    finally:
        supervisor.stop(grace=0)

    assert job.status == "succeeded", f"{job.error_code}: {job.error_message}"
    with Session(sqlite_engine) as session:
        stored = models.artifact(session, job.model_id)
    assert stored is not None
    model = load_model(read_artifact(DataStore(store_url), stored))
    assert model.predict(np.arange(3, dtype=np.float64).reshape(-1, 1)).shape == (3,)


@pytest.mark.parametrize("behaviour", ["sleep", "ignore_stop"])
def test_a_fit_past_the_runtime_limit_fails_with_the_reason(
    sqlite_engine: Engine, sqlite_url: str, store_url: str, tmp_path: Path, behaviour: str
) -> None:
    config = fast_config(store_url, max_runtime_seconds=1.0, shutdown_grace_seconds=STOP_GRACE)
    supervisor = Supervisor(sqlite_url, config, train=standin, worker_id="limited")
    supervisor.start()
    try:
        pidfile = tmp_path / "pid"
        job_id = add_job(
            sqlite_engine,
            add_dataset(sqlite_engine),
            behaviour=behaviour,
            seconds=60,
            pidfile=str(pidfile),
        )
        pid = _read_pid(pidfile)
        job = wait_for(sqlite_engine, job_id, ended, timeout=20)
    finally:
        supervisor.stop(grace=0)

    # Failed at once (a retry would run as long again), with a reason naming the setting; a
    # fit that ignores the stop request is killed after the stop grace.
    assert (job.status, job.attempts, job.error_code) == ("failed", 1, "runtime_exceeded")
    assert "COPPICE_MAX_RUNTIME_SECONDS" in (job.error_message or "")
    assert _pid_gone(pid)


def test_a_job_s_own_runtime_limit_is_enforced_under_the_server_s(
    sqlite_engine: Engine, sqlite_url: str, store_url: str
) -> None:
    # The limit is set before the worker starts: the claim takes the job's snapshot.
    job_id = add_job(sqlite_engine, add_dataset(sqlite_engine), behaviour="sleep", seconds=60)
    with Session(sqlite_engine) as session, session.begin():
        session.get_one(JobRecord, job_id).max_runtime_seconds = 1.0
    supervisor = Supervisor(
        sqlite_url,
        fast_config(store_url, max_runtime_seconds=600.0),
        train=standin,
        worker_id="limited",
    )
    supervisor.start()
    started = time.monotonic()
    try:
        job = wait_for(sqlite_engine, job_id, ended, timeout=45)
    finally:
        supervisor.stop(grace=0)

    assert (job.status, job.attempts, job.error_code) == ("failed", 1, "runtime_exceeded")
    assert "the job's limit (max_runtime_seconds)" in (job.error_message or "")
    assert time.monotonic() - started < 50  # the job's 1 s, not the 60 s fit
