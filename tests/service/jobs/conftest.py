"""Job fixtures: an app client on SQLite, then on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from service.app import create_app
from service.config import Settings


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend_settings(request: pytest.FixtureRequest) -> Settings:
    name = "settings" if request.param == "sqlite" else "postgres_settings"
    settings: Settings = request.getfixturevalue(name)
    return settings.model_copy(update={"max_estimators": 500, "max_depth": 20})


@asynccontextmanager
async def app_client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """A client of a running app made with ``settings`` (kept on it as ``app_settings``)."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            client.app_settings = settings  # type: ignore[attr-defined]
            yield client


@pytest.fixture
async def any_client(backend_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(backend_settings) as client:
        yield client
