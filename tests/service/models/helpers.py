"""Models trained the worker's way, and the app they live in, for the model tests.

A model is made as in production, minus the worker process: the dataset and the job go in
through the API, then the job is claimed, trained with ``run_training`` and stored with the
worker's own ``claim`` and ``finish_succeeded``.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
from fastapi import FastAPI
from sqlalchemy import Engine

from service.config import Settings
from service.datasets.columns import ColumnData
from service.datasets.service import load_columns
from service.db.session import transaction
from service.deps import Resources
from service.store import DataStore
from service.training import TrainingSpec, run_training
from service.worker import queue
from service.worker.fit_process import JobSnapshot, store_outcome
from service.worker.lease import LeasePolicy

# The service_settings fixture's COPPICE_MAX_PREDICT_ROWS.
MAX_PREDICT_ROWS = 50

WORKER = "test-worker"
N_ROWS = 160
COLUMNS = ["x", "z", "colour", "amount", "label", "species"]


def dataset_rows(n: int = N_ROWS, seed: int = 0) -> list[list[Any]]:
    """x, z numeric (x with gaps), colour categorical (with gaps), three targets."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    z = rng.normal(size=n)
    colours = rng.choice(["red", "green", "blue"], size=n)
    rows = []
    for i in range(n):
        colour = None if i % 13 == 0 else str(colours[i])
        amount = 2 * x[i] + (1.5 if colour == "red" else 0.0) + 0.3 * z[i]
        label = "yes" if amount > 0.5 else "no"
        species = "a" if x[i] < -0.4 else ("b" if x[i] < 0.4 else "c")
        rows.append(
            [None if i % 11 == 0 else float(x[i]), float(z[i]), colour, amount, label, species]
        )
    return rows


def dataset_csv(rows: list[list[Any]]) -> bytes:
    """``rows`` (of :data:`COLUMNS`) as a CSV file, as a user uploads them."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    # An empty cell is a missing value in CSV, as null is in JSON.
    writer.writerows([["" if cell is None else cell for cell in row] for row in rows])
    return buffer.getvalue().encode()


@dataclass
class Service:
    """One running app, its HTTP client and a way to get trained models into it."""

    client: httpx.AsyncClient
    app: FastAPI
    settings: Settings
    dataset_id: str = ""

    @property
    def db_engine(self) -> Engine:
        resources: Resources = self.app.state.resources
        return resources.db_engine

    @property
    def store(self) -> DataStore:
        resources: Resources = self.app.state.resources
        return resources.store

    async def dataset(self) -> str:
        if not self.dataset_id:
            response = await self.client.post(
                "/v1/datasets", json={"columns": COLUMNS, "rows": dataset_rows()}
            )
            assert response.status_code == 201, response.text
            self.dataset_id = response.json()["id"]
        return self.dataset_id

    async def train(
        self,
        method: str,
        *,
        target: str = "label",
        params: dict[str, Any] | None = None,
        validation: dict[str, Any] | None = None,
        features: list[str] | None = None,
        name: str | None = None,
    ) -> str:
        """Train one model the way the worker does; returns its id."""
        body = await self.job_body(
            method,
            target=target,
            params=params,
            validation=validation,
            features=features,
            name=name,
        )
        job = await self.client.post("/v1/jobs", json=body)
        assert job.status_code == 202, job.text
        return train_queued_job(self.db_engine, self.store, job.json()["id"])

    async def job_body(
        self,
        method: str,
        *,
        target: str = "label",
        params: dict[str, Any] | None = None,
        validation: dict[str, Any] | None = None,
        features: list[str] | None = None,
        name: str | None = None,
    ) -> dict[str, Any]:
        """The ``POST /v1/jobs`` body :meth:`train` sends, on :meth:`dataset`."""
        body: dict[str, Any] = {
            "dataset_id": await self.dataset(),
            "target": target,
            "method": method,
            "features": features or ["x", "z", "colour"],
            "params": params if params is not None else {"n_estimators": 10},
            "seed": 7,
        }
        if validation is not None:
            body["validation"] = validation
        if name is not None:
            body["name"] = name
        return body


def claim_queued_job(
    db_engine: Engine, store: DataStore, job_id: str
) -> tuple[JobSnapshot, TrainingSpec, dict[str, ColumnData]]:
    """Claim the queued job ``job_id`` as the worker does: what it runs, and on what data."""
    policy = LeasePolicy(
        lease=timedelta(minutes=5), heartbeat=timedelta(seconds=30), backoff=timedelta(0)
    )
    with transaction(db_engine) as session:
        record = queue.claim(session, worker_id=WORKER, now=datetime.now(UTC), policy=policy)
        assert record is not None and record.id == job_id
        spec = TrainingSpec.from_job(record)
        columns = load_columns(session, record.dataset_id or "", spec.columns, store)
        return JobSnapshot.of(record, n_jobs=1), spec, columns


def train_queued_job(db_engine: Engine, store: DataStore, job_id: str) -> str:
    """Claim the queued job ``job_id``, train it in this process and store it (the artifact in
    ``store`` first, as the fit process does, then the rows); its model id."""
    snapshot, spec, columns = claim_queued_job(db_engine, store, job_id)
    outcome = run_training(spec, columns, lambda fraction, stage: None, lambda: False)
    stored = store_outcome(store, outcome)
    with transaction(db_engine) as session:
        model_id = queue.finish_succeeded(
            session, store, snapshot, WORKER, stored, now=datetime.now(UTC)
        )
    assert model_id is not None
    return model_id
