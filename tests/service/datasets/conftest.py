"""Dataset fixtures: a session or an app's client on a migrated database, SQLite or PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import httpx
import pytest
from sqlalchemy.orm import Session

from service.app import create_app
from service.config import Settings
from service.db.session import create_db_engine
from service.store import DataStore, store_from_settings


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend_settings(request: pytest.FixtureRequest) -> Settings:
    """Settings on a migrated SQLite file, then on a migrated PostgreSQL database."""
    name = "settings" if request.param == "sqlite" else "postgres_settings"
    settings: Settings = request.getfixturevalue(name)
    return settings


@pytest.fixture
def store(backend_settings: Settings) -> DataStore:
    """The data store of ``backend_settings`` (a directory in the test's data dir)."""
    return store_from_settings(backend_settings)


@pytest.fixture
def session(backend_settings: Settings) -> Iterator[Session]:
    engine = create_db_engine(backend_settings.resolved_database_url)
    with Session(engine, expire_on_commit=False) as db_session:
        yield db_session
    engine.dispose()


@asynccontextmanager
async def app_client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """A client of a real app on ``settings``, its lifespan running."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield client


@pytest.fixture
async def any_client(backend_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """A client on SQLite, then on PostgreSQL."""
    async with app_client(backend_settings) as client:
        yield client
