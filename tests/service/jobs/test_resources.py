"""A job's ``resources``: what its ended fit cost, measured by the fit process (API.md, Jobs)."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from service.app import create_app
from service.config import Settings
from tests.service.models.helpers import COLUMNS, dataset_rows

pytestmark = pytest.mark.anyio


async def _ended(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    with anyio.fail_after(120):
        while True:
            job = (await client.get(f"/v1/jobs/{job_id}")).json()
            if job["status"] not in ("queued", "running"):
                return dict(job)
            assert job["resources"] is None  # nothing before the fit has ended
            await anyio.sleep(0.05)


async def test_an_ended_fit_says_what_it_cost(settings: Settings) -> None:
    app = create_app(settings.model_copy(update={"embedded_worker": True}))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client,
    ):
        dataset = await client.post(
            "/v1/datasets", json={"columns": COLUMNS, "rows": dataset_rows()}
        )
        dataset_id = dataset.json()["id"]
        created = await client.post(
            "/v1/jobs",
            json={
                "dataset_id": dataset_id,
                "target": "label",
                "method": "random_forest",
                "params": {"n_estimators": 20},
            },
        )
        assert created.status_code == 202, created.text
        assert created.json()["resources"] is None
        job = await _ended(client, created.json()["id"])
        assert job["status"] == "succeeded", job
        resources = job["resources"]
        assert set(resources) == {
            "wall_seconds",
            "cpu_seconds",
            "peak_rss_bytes",
            "backend",
            "dask_workers",
        }
        assert resources["backend"] == "local" and resources["dask_workers"] is None
        assert 0 < resources["wall_seconds"] < 120
        assert resources["cpu_seconds"] > 0
        # A Python process with NumPy and the engine loaded: tens of MiB at least, far from GiB.
        assert 20 * 2**20 < resources["peak_rss_bytes"] < 8 * 2**30
        listed = (await client.get("/v1/jobs")).json()["items"]
        assert [j["resources"] for j in listed if j["id"] == job["id"]] == [resources]

        # A fit the engine refuses (a monotone constraint on a categorical feature, which only
        # the fit finds out) ends too, and says what it cost.
        failing = await client.post(
            "/v1/jobs",
            json={
                "dataset_id": dataset_id,
                "target": "amount",
                "method": "xgboost",
                "features": ["colour"],
                "params": {"n_estimators": 2, "monotone_constraints": [1]},
            },
        )
        assert failing.status_code == 202, failing.text
        failed = await _ended(client, failing.json()["id"])
        assert failed["status"] == "failed", failed
        assert failed["error"]["code"] == "fit_failed"
        assert failed["resources"]["peak_rss_bytes"] > 0
