"""A job created through the API trains with exactly what the worker will hand over."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from sqlalchemy.orm import Session

import engine
from service.config import Settings
from service.datasets.service import load_columns
from service.db.session import create_db_engine
from service.jobs import repository
from service.store import store_from_settings
from service.training import TrainingSpec, run_training

pytestmark = pytest.mark.anyio


async def test_queued_job_trains_from_its_record(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    rng = np.random.default_rng(0)
    rows = [
        [float(x), ["red", "blue", None][i % 3], "yes" if x > 0 else "no"]
        for i, x in enumerate(rng.normal(size=60))
    ]
    dataset = await client.post(
        "/v1/datasets", json={"columns": ["x", "colour", "label"], "rows": rows}
    )
    job = await client.post(
        "/v1/jobs",
        json={
            "dataset_id": dataset.json()["id"],
            "target": "label",
            "method": "gradient_boosting",
            "params": {"n_estimators": 5},
        },
    )
    assert job.status_code == 202, job.text

    db = create_db_engine(settings.resolved_database_url)
    with Session(db) as session:
        record = repository.get(session, job.json()["id"])
        assert record is not None
        spec = TrainingSpec.from_job(record, n_jobs=settings.processes_per_job)
        columns = load_columns(
            session, record.dataset_id or "", spec.columns, store_from_settings(settings)
        )
    db.dispose()
    outcome = run_training(spec, columns, lambda f, s: None, lambda: False)

    assert spec.seed == job.json()["seed"]
    assert outcome.classes == ["no", "yes"]
    assert outcome.encoding["categories"] == {"colour": ["blue", "red"]}
    assert outcome.metrics["validation"]["accuracy"] > 0.7
    model = engine.load_model(outcome.artifact)
    assert model.predict(np.array([[2.0, 0.0], [-2.0, np.nan]])).tolist() == ["yes", "no"]
