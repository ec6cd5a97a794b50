"""Search fixtures: an app client on SQLite, then on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from service.config import Settings
from tests.service.jobs.conftest import app_client


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend_settings(request: pytest.FixtureRequest) -> Settings:
    name = "settings" if request.param == "sqlite" else "postgres_settings"
    settings: Settings = request.getfixturevalue(name)
    return settings


@pytest.fixture
async def any_client(backend_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(backend_settings) as client:
        yield client
