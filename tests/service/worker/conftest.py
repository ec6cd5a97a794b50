"""Worker fixtures: migrated databases of both kinds; helpers live in ``worker_helpers``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from service.config import Settings
from service.db.session import create_db_engine
from service.store import DataStore

# Test modules import worker_helpers, and fit processes worker_standins, by module name.
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str:
    """A migrated database of each kind: a SQLite file and a throwaway PostgreSQL database."""
    fixture = "settings" if request.param == "sqlite" else "postgres_settings"
    settings: Settings = request.getfixturevalue(fixture)
    return settings.resolved_database_url


@pytest.fixture
def sqlite_url(settings: Settings) -> str:
    return settings.resolved_database_url


@pytest.fixture
def store_url(settings: Settings) -> str:
    """The data store beside the ``settings`` database (its data dir's ``store``)."""
    return settings.resolved_store_url


@pytest.fixture
def data_store(tmp_path: Path) -> DataStore:
    """A data store of the test's own, on local disk."""
    return DataStore(str(tmp_path / "store"))


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    db_engine = create_db_engine(database_url)
    yield db_engine
    db_engine.dispose()
