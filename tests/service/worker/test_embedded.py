"""`coppice serve`'s embedded worker: started and stopped by the app's lifespan."""

from __future__ import annotations

import pytest
from fastapi import FastAPI

from service.app import create_app
from service.config import Settings
from service.deps import Resources

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
