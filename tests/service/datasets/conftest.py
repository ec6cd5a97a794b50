"""Dataset fixtures: a session on a migrated database, SQLite or PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.session import create_db_engine


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend_settings(request: pytest.FixtureRequest) -> Settings:
    """Settings on a migrated SQLite file, then on a migrated PostgreSQL database."""
    name = "settings" if request.param == "sqlite" else "postgres_settings"
    settings: Settings = request.getfixturevalue(name)
    return settings


@pytest.fixture
def session(backend_settings: Settings) -> Iterator[Session]:
    engine = create_db_engine(backend_settings.resolved_database_url)
    with Session(engine, expire_on_commit=False) as db_session:
        yield db_session
    engine.dispose()
