"""Service fixtures: per-test settings, a running app and its HTTP client, PostgreSQL."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from service.app import create_app
from service.config import Settings
from service.db.migrate import upgrade_to_head
from tests.postgres import (
    create_database,
    database_url,
    drop_database,
    server_in_use,
    throwaway_database,
)


@pytest.fixture(scope="session")
def migrated_sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file at the newest revision, migrated once and copied by each test."""
    path = tmp_path_factory.mktemp("template") / "coppice.db"
    upgrade_to_head(f"sqlite:///{path}")
    return path


@pytest.fixture
def settings(tmp_path: Path, migrated_sqlite_template: Path) -> Settings:
    """Settings isolated to this test: a fresh data dir and its own migrated SQLite file.

    ``database_url=None`` is passed explicitly so a ``COPPICE_DATABASE_URL`` in the
    developer's shell cannot point the test at a real database.
    """
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    shutil.copyfile(migrated_sqlite_template, data_dir / "coppice.db")
    # No embedded worker: a test that wants jobs run starts its own.
    return Settings(data_dir=data_dir, database_url=None, embedded_worker=False)


@pytest.fixture(scope="session")
def migrated_postgres_template() -> Iterator[str]:
    """A PostgreSQL database at the newest revision, migrated once and copied by each test.

    Its name, for ``CREATE DATABASE ... TEMPLATE``; nobody connects to it after the migration
    (a template must have no connections). It holds the server only while it is created and
    dropped, so a server restart may come in between.
    """
    with server_in_use():
        name = create_database()
        try:
            upgrade_to_head(database_url(name))
        except BaseException:
            drop_database(name)
            raise
    yield name
    with server_in_use():
        drop_database(name)


@pytest.fixture
def postgres_settings(tmp_path: Path, migrated_postgres_template: str) -> Iterator[Settings]:
    """Like ``settings``, on a throwaway PostgreSQL database migrated to the newest revision.

    The database is a copy of the migrated template, as ``settings`` copies a SQLite file.
    """
    with throwaway_database(template=migrated_postgres_template) as url:
        yield Settings(data_dir=tmp_path / "data", database_url=url, embedded_worker=False)


@pytest.fixture
def coppice_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point ``COPPICE_*`` variables at ``tmp_path`` for code that builds its own Settings."""
    for name in list(os.environ):
        if name.startswith("COPPICE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("COPPICE_DATA_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    """A real app with its lifespan running, as uvicorn would run it."""
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        yield http


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """URL of a throwaway PostgreSQL database, dropped after the test.

    The server comes from ``COPPICE_TEST_POSTGRES_URL`` (default: the local one with trust
    auth); the test is skipped when that server cannot be reached.
    """
    with throwaway_database() as url:
        yield url
