"""An app with its prediction log, on SQLite and on PostgreSQL, and models trained into it."""

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


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def open_service(request: pytest.FixtureRequest, backend: str) -> OpenService:
    """``async with open_service(**settings) as svc``: an app with those settings changed."""
    name = "settings" if backend == "sqlite" else "postgres_settings"
    base: Settings = request.getfixturevalue(name)

    @asynccontextmanager
    async def opened(**changes: Any) -> AsyncIterator[Service]:
        settings = base.model_copy(update={"max_predict_rows": MAX_PREDICT_ROWS, **changes})
        app = create_app(settings)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                yield Service(client=client, app=app, settings=settings)

    return opened


@pytest.fixture
async def svc(open_service: OpenService) -> AsyncIterator[Service]:
    async with open_service() as service:
        yield service
