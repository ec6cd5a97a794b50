"""An app with its embedded worker (real batch processes), on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from service.app import create_app
from service.config import Settings
from tests.service.models.helpers import MAX_PREDICT_ROWS, Service

OpenService = Callable[..., Any]


class WorkerService(Service):
    """A :class:`Service` whose models are trained by its embedded worker, which would
    otherwise race the test for the jobs it queues."""

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
        if not self.settings.embedded_worker:
            return await super().train(
                method,
                target=target,
                params=params,
                validation=validation,
                features=features,
                name=name,
            )
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
        for _ in range(60):
            ended = await self.client.get(f"/v1/jobs/{job.json()['id']}", params={"wait": 10})
            if ended.json()["status"] not in ("queued", "running"):
                break
        assert ended.json()["status"] == "succeeded", ended.text
        return str(ended.json()["model_id"])


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def open_service(request: pytest.FixtureRequest, backend: str) -> OpenService:
    """``async with open_service(**settings) as svc``: an app whose worker runs batches."""
    name = "settings" if backend == "sqlite" else "postgres_settings"
    base: Settings = request.getfixturevalue(name)

    @asynccontextmanager
    async def opened(**changes: Any) -> AsyncIterator[Service]:
        settings = base.model_copy(
            update={
                "max_predict_rows": MAX_PREDICT_ROWS * 100,
                "embedded_worker": True,
                "poll_seconds": 0.5,
                **changes,
            }
        )
        app = create_app(settings)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                yield WorkerService(client=client, app=app, settings=settings)

    return opened


@pytest.fixture
async def svc(open_service: OpenService) -> AsyncIterator[Service]:
    async with open_service() as service:
        yield service
