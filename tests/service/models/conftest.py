"""Model fixtures: an app on SQLite and on PostgreSQL, with a way to train models into it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from service.app import create_app
from service.config import Settings
from tests.service.models.helpers import MAX_PREDICT_ROWS, Service


def _settings(request: pytest.FixtureRequest, backend: str, **changes: Any) -> Settings:
    name = "settings" if backend == "sqlite" else "postgres_settings"
    settings: Settings = request.getfixturevalue(name)
    return settings.model_copy(update=changes)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def service_settings(request: pytest.FixtureRequest, backend: str) -> Settings:
    return _settings(request, backend, max_predict_rows=MAX_PREDICT_ROWS)


@pytest.fixture
async def svc(service_settings: Settings) -> AsyncIterator[Service]:
    app = create_app(service_settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield Service(client=client, app=app, settings=service_settings)
