"""`coppice serve`'s embedded worker: started and stopped by the app's lifespan."""

from __future__ import annotations

import anyio
import httpx
import pytest
from fastapi import FastAPI

from service.app import create_app
from service.config import Settings
from service.deps import Resources
from tests.service.models.helpers import COLUMNS, dataset_rows

pytestmark = pytest.mark.anyio


async def test_lifespan_runs_an_embedded_worker(settings: Settings) -> None:
    app: FastAPI = create_app(settings.model_copy(update={"embedded_worker": True}))

    async with app.router.lifespan_context(app):
        resources: Resources = app.state.resources
        worker = resources.worker
        assert worker is not None
        assert worker.running_jobs == []
        assert worker._thread is not None and worker._thread.is_alive()

    assert not worker._thread.is_alive()


async def test_embedded_worker_can_be_turned_off(settings: Settings) -> None:
    app = create_app(settings.model_copy(update={"embedded_worker": False}))

    async with app.router.lifespan_context(app):
        assert app.state.resources.worker is None


async def test_a_queued_job_wakes_the_embedded_worker(settings: Settings) -> None:
    """With a poll a minute long, only the wake-up after POST /v1/jobs can start a job soon.

    The first job is claimed at the worker's first look at the queue (whenever its start-up
    ends); once it has ended the worker is idle for a whole poll, and the second job must
    still start and end within seconds.
    """
    app = create_app(settings.model_copy(update={"embedded_worker": True, "poll_seconds": 60.0}))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client,
    ):
        dataset = await client.post(
            "/v1/datasets", json={"columns": COLUMNS, "rows": dataset_rows()}
        )
        job = {"dataset_id": dataset.json()["id"], "target": "label", "method": "decision_tree"}
        for _ in range(2):
            response = await client.post("/v1/jobs", json=job)
            assert response.status_code == 202, response.text
            status = "queued"
            with anyio.fail_after(20):
                while status in ("queued", "running"):
                    await anyio.sleep(0.05)
                    status = (await client.get(f"/v1/jobs/{response.json()['id']}")).json()[
                        "status"
                    ]
            assert status == "succeeded"
