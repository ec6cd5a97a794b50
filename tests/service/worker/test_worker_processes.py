"""Whole worker processes on PostgreSQL: many jobs shared by two workers, and a worker crash.

Each worker runs ``run_standin_worker.py``, which is ``coppice worker``'s own code path
(``run_worker``) with the stand-in training function, configured by ``COPPICE_*`` variables.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session
from worker_helpers import add_dataset, add_job, ended, statuses, wait_for

from service.config import Settings
from service.db.session import create_db_engine
from service.db.tables import JobRecord

pytestmark = pytest.mark.postgres

LAUNCHER = Path(__file__).with_name("run_standin_worker.py")


@pytest.fixture
def pg_engine(postgres_settings: Settings) -> Iterator[Engine]:
    db_engine = create_db_engine(postgres_settings.resolved_database_url)
    yield db_engine
    db_engine.dispose()


class Workers:
    """Starts worker processes and makes sure none outlives the test."""

    def __init__(self, database_url: str, log_dir: Path) -> None:
        self.database_url = database_url
        self.log_dir = log_dir
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self, *command: str, **settings: str) -> subprocess.Popen[bytes]:
        """Start ``command`` (default: the stand-in worker) with worker settings for tests."""
        env = {name: value for name, value in os.environ.items() if not name.startswith("COPPICE_")}
        env |= {
            "COPPICE_DATABASE_URL": self.database_url,
            # The workers' shared data store (data_dir/store), inside the test's directory.
            "COPPICE_DATA_DIR": str(self.log_dir),
            "COPPICE_WORKER_CONCURRENCY": "2",
            "COPPICE_JOB_LEASE_SECONDS": "10",
            "COPPICE_HEARTBEAT_SECONDS": "0.5",
            "COPPICE_POLL_SECONDS": "0.1",
            "COPPICE_RETRY_BACKOFF_SECONDS": "0",
            "COPPICE_SHUTDOWN_GRACE_SECONDS": "5",
        } | {f"COPPICE_{name.upper()}": value for name, value in settings.items()}
        log = (self.log_dir / f"worker-{len(self.processes)}.log").open("wb")
        process = subprocess.Popen(
            list(command) or [sys.executable, str(LAUNCHER)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.processes.append(process)
        return process

    def stop_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture
def workers(postgres_settings: Settings, tmp_path: Path) -> Iterator[Workers]:
    started = Workers(postgres_settings.resolved_database_url, tmp_path)
    yield started
    started.stop_all()


# Eight jobs is four each at two at a time: enough for both workers to race for every claim.
# `make long` runs the 30 of before as well (about 110 s at load 10).
@pytest.mark.parametrize("n_jobs", [8, pytest.param(30, marks=pytest.mark.long)])
def test_two_workers_run_each_job_exactly_once(
    pg_engine: Engine, workers: Workers, tmp_path: Path, n_jobs: int
) -> None:
    dataset_id = add_dataset(pg_engine)
    log = tmp_path / "runs.log"
    job_ids = [add_job(pg_engine, dataset_id, log=str(log)) for _ in range(n_jobs)]

    first, second = workers.start(), workers.start()
    # About 10 s on a quiet machine; 60 s was missed at load 12 with nothing wrong.
    deadline = time.monotonic() + 300
    while any(status != "succeeded" for status in statuses(pg_engine).values()):
        assert time.monotonic() < deadline, collections.Counter(statuses(pg_engine).values())
        assert first.poll() is None and second.poll() is None, "a worker died"
        time.sleep(0.2)

    runs = [line.split()[0] for line in log.read_text().splitlines()]
    assert sorted(runs) == sorted(job_ids), "each job must be trained exactly once"
    jobs = [wait_for(pg_engine, job_id, ended) for job_id in job_ids]
    assert {job.attempts for job in jobs} == {1}
    assert len({job.model_id for job in jobs}) == n_jobs
    # Both workers took part (each held at most two jobs at a time).
    assert len({job.lease_owner for job in jobs}) == 2

    workers.stop_all()
    assert [process.returncode for process in workers.processes] == [0, 0]


def test_a_killed_worker_s_job_is_recovered_by_the_next_worker(
    pg_engine: Engine, workers: Workers, tmp_path: Path
) -> None:
    pidfile = tmp_path / "fit.pid"
    job_id = add_job(
        pg_engine, add_dataset(pg_engine), behaviour="sleep", seconds=4, pidfile=str(pidfile)
    )
    # A short lease: the job's recovery waits for it to lapse.
    doomed = workers.start(job_lease_seconds="4")
    running = wait_for(pg_engine, job_id, lambda job: job.status == "running" and job.progress > 0)
    first_owner = running.lease_owner

    doomed.send_signal(signal.SIGKILL)
    doomed.wait()
    # With its worker gone, the orphaned fit notices (its parent changed) and stops.
    fit_pid = int(pidfile.read_text())
    deadline = time.monotonic() + 60
    while Path(f"/proc/{fit_pid}").exists():
        assert time.monotonic() < deadline, "the orphaned fit kept running"
        time.sleep(0.1)

    workers.start(job_lease_seconds="4")
    job = wait_for(pg_engine, job_id, ended, timeout=120)

    assert (job.status, job.attempts) == ("succeeded", 2)
    assert job.lease_owner != first_owner


def test_coppice_worker_trains_a_real_job_and_stops_on_sigterm(
    pg_engine: Engine, workers: Workers
) -> None:
    job_id = add_job(pg_engine, add_dataset(pg_engine))
    with Session(pg_engine) as session, session.begin():
        job = session.get_one(JobRecord, job_id)
        job.method, job.params, job.validation = "random_forest", {"n_estimators": 5}, {}

    worker = workers.start(sys.executable, "-m", "service", "worker")
    job = wait_for(pg_engine, job_id, ended, timeout=120)
    assert job.status == "succeeded", f"{job.error_code}: {job.error_message}"

    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=20) == 0
