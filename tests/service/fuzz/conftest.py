"""Fuzzing fixtures: one database seeded with a dataset and fitted models, and apps on it.

The seed is made once per package (uploading and training take a second or two) and every
fuzz test opens its own app on a copy of it, so what one test uploads or deletes never shows
up in another.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import Engine

from service.app import create_app
from service.config import Settings
from service.db.session import create_db_engine
from tests.service.models.helpers import COLUMNS, dataset_rows, train_queued_job

# Small enough that the row limit (413) is reached by generated bodies too.
MAX_PREDICT_ROWS = 50


@dataclass(frozen=True)
class Seed:
    """A migrated SQLite file holding one dataset, a finished job and two fitted models."""

    database: Path
    dataset_id: str
    job_id: str
    classifier_id: str  # random_forest on "label" from x, z, colour: explainable, with proba
    regressor_id: str  # gradient_boosting on "amount" from x, z, colour
    # The classifier as version 1 of a registered model, with alias "production".
    registered_name: str = "churn"
    alias: str = "production"
    # A search of two candidates, cancelled before they ran, so /v1/searches/{id} is found.
    search_id: str = ""


@pytest.fixture(scope="package")
def seed(tmp_path_factory: pytest.TempPathFactory, migrated_sqlite_template: Path) -> Seed:
    data_dir = tmp_path_factory.mktemp("fuzz-seed")
    shutil.copyfile(migrated_sqlite_template, data_dir / "coppice.db")
    # Synchronous, run on its own event loop: anyio's fixtures are per test, this is not.
    return anyio.run(_seed, _settings(data_dir))


async def _seed(settings: Settings) -> Seed:
    app = create_app(settings)
    async with app.router.lifespan_context(app), _client(app) as client:
        upload = await client.post(
            "/v1/datasets", json={"columns": COLUMNS, "rows": dataset_rows()}
        )
        assert upload.status_code == 201, upload.text
        dataset_id = upload.json()["id"]
        job_ids, model_ids = [], []
        for method, target in (("random_forest", "label"), ("gradient_boosting", "amount")):
            job = await client.post(
                "/v1/jobs",
                json={
                    "dataset_id": dataset_id,
                    "target": target,
                    "method": method,
                    "features": ["x", "z", "colour"],
                    "params": {"n_estimators": 10},
                    "seed": 7,
                },
            )
            assert job.status_code == 202, job.text
            job_ids.append(job.json()["id"])
            model_ids.append(
                train_queued_job(
                    app.state.resources.db_engine, app.state.resources.store, job_ids[-1]
                )
            )
        registry = "/v1/registered-models"
        for path, body in (
            (registry, {"name": Seed.registered_name}),
            (f"{registry}/{Seed.registered_name}/versions", {"model_id": model_ids[0]}),
        ):
            assert (await client.post(path, json=body)).status_code == 201
        alias = f"{registry}/{Seed.registered_name}/aliases/{Seed.alias}"
        assert (await client.put(alias, json={"version": 1})).status_code == 200
        search = await client.post(
            "/v1/searches",
            json={
                "dataset_id": dataset_id,
                "target": "label",
                "features": ["x", "z", "colour"],
                "candidates": [{"method": "decision_tree", "params": {"max_depth": [2, 3]}}],
                "strategy": "grid",
                "validation": {"folds": 2},
            },
        )
        assert search.status_code == 202, search.text
        # Cancelled at once: its queued candidates would otherwise be the oldest queued jobs,
        # which the tests that claim their own job as a worker does would take instead.
        cancel = await client.post(f"/v1/searches/{search.json()['id']}/cancel")
        assert cancel.status_code in (200, 202), cancel.text
    return Seed(
        settings.data_dir / "coppice.db",
        dataset_id,
        job_ids[0],
        *model_ids,
        search_id=search.json()["id"],
    )


def _settings(data_dir: Path) -> Settings:
    # database_url=None so a COPPICE_DATABASE_URL in the shell cannot aim the fuzzers at it.
    return Settings(
        data_dir=data_dir,
        database_url=None,
        embedded_worker=False,
        max_predict_rows=MAX_PREDICT_ROWS,
    )


@pytest.fixture
def fuzz_settings(seed: Seed, tmp_path: Path) -> Settings:
    """Settings on this test's own copy of the seeded database."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    shutil.copyfile(seed.database, data_dir / "coppice.db")
    # The models' artifacts live in the data store beside the database: copied together.
    shutil.copytree(seed.database.parent / "store", data_dir / "store")
    return _settings(data_dir)


@pytest.fixture
def fuzz_db(fuzz_settings: Settings) -> Iterator[Engine]:
    """The database of this test's app, for what the worker would do (claim, train)."""
    engine = create_db_engine(fuzz_settings.resolved_database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def fuzz_app(fuzz_settings: Settings) -> FastAPI:
    """An app on this test's copy of the seed, not yet started.

    Schemathesis starts its lifespan with the first request and ends it after the test.
    """
    return create_app(fuzz_settings)


@pytest.fixture
async def fuzz_client(fuzz_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """A client of a running app on this test's copy of the seed."""
    app = create_app(fuzz_settings)
    async with app.router.lifespan_context(app), _client(app) as client:
        yield client


def _client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")
