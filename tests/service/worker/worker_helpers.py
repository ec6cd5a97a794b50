"""Helpers for worker tests: a dataset to train on, jobs, and fast worker timings."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from service.datasets.columns import NumericColumn, encode_column
from service.db.tables import DatasetColumnRecord, DatasetRecord, JobRecord, new_id
from service.worker.claim_loop import WorkerConfig
from service.worker.lease import LeasePolicy

FAST_POLICY = LeasePolicy(
    # Generous: on a loaded two-core machine starting a fit process can take seconds.
    lease=timedelta(seconds=10),
    heartbeat=timedelta(seconds=0.5),
    backoff=timedelta(0),
)


def fast_config(store_url: str, **overrides: Any) -> WorkerConfig:
    """Quick timings, and fits that write their artifacts to the store at ``store_url``."""
    values: dict[str, Any] = {
        "store_url": store_url,
        "concurrency": 2,
        "processes_per_job": 1,
        "policy": FAST_POLICY,
        "poll_seconds": 0.1,
        "shutdown_grace_seconds": 5.0,
    }
    return WorkerConfig(**(values | overrides))


def add_dataset(engine: Engine) -> str:
    """A two-column numeric dataset (``x``, ``y``); returns its id."""
    dataset_id = new_id()
    values = np.arange(20, dtype=np.float64)
    with Session(engine) as session, session.begin():
        session.add(
            DatasetRecord(
                id=dataset_id, name="d", n_rows=20, n_columns=2, size_bytes=1, sha256="0" * 64
            )
        )
        session.flush()
        for position, name in enumerate(("x", "y")):
            session.add(
                DatasetColumnRecord(
                    dataset_id=dataset_id,
                    position=position,
                    name=name,
                    kind="numeric",
                    n_missing=0,
                    n_unique=20,
                    stats={},
                    data=encode_column(NumericColumn(name, values)),
                )
            )
    return dataset_id


def add_job(engine: Engine, dataset_id: str, *, max_attempts: int = 3, **params: Any) -> str:
    """A queued job whose stand-in training does what ``params["behaviour"]`` says."""
    job_id = new_id()
    with Session(engine) as session, session.begin():
        session.add(
            JobRecord(
                id=job_id,
                name="j",
                dataset_id=dataset_id,
                method="standin",
                task="regression",
                target="y",
                features=["x"],
                params=params,
                validation={},
                seed=0,
                max_attempts=max_attempts,
            )
        )
    return job_id


def get_job(engine: Engine, job_id: str) -> JobRecord:
    with Session(engine, expire_on_commit=False) as session:
        job = session.get(JobRecord, job_id)
        assert job is not None
        return job


def wait_for(
    engine: Engine,
    job_id: str,
    done: Callable[[JobRecord], bool],
    *,
    timeout: float = 120.0,
) -> JobRecord:
    """Poll the job until ``done(job)``; fail the test with the job's state on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        job = get_job(engine, job_id)
        if done(job):
            return job
        if time.monotonic() > deadline:
            pytest.fail(
                f"job {job_id} stuck: status={job.status} attempts={job.attempts} "
                f"stage={job.stage!r} error={job.error_code}: {job.error_message}"
            )
        time.sleep(0.05)


def ended(job: JobRecord) -> bool:
    return job.status in ("succeeded", "failed", "cancelled")


def statuses(engine: Engine) -> dict[str, str]:
    with Session(engine) as session:
        return {
            row.id: row.status for row in session.execute(select(JobRecord.id, JobRecord.status))
        }
