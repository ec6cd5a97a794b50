"""``service.db.health.database_ready``: the one query every readiness check asks."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy import create_engine

from service.config import Settings
from service.db.health import database_ready
from service.db.session import create_db_engine


@pytest.mark.parametrize(
    "settings_fixture", ["settings", pytest.param("postgres_settings", marks=pytest.mark.postgres)]
)
def test_a_database_that_answers_is_ready(
    request: pytest.FixtureRequest, settings_fixture: str
) -> None:
    settings: Settings = request.getfixturevalue(settings_fixture)
    engine = create_db_engine(settings.resolved_database_url)
    try:
        assert database_ready(engine) is True
    finally:
        engine.dispose()


def test_an_unreachable_sqlite_file_is_not_ready() -> None:
    assert database_ready(create_engine("sqlite:////nonexistent-dir/coppice.db")) is False


def test_an_unreachable_server_is_not_ready_and_its_password_is_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Port 1 on the loopback refuses at once; the URL carries a password the log must not.
    engine = create_engine(
        "postgresql+psycopg://coppice:s3cret-pw@127.0.0.1:1/none?connect_timeout=2"
    )
    with caplog.at_level(logging.WARNING, logger="service.db.health"):
        assert database_ready(engine) is False
    assert "database unreachable" in caplog.text
    assert "s3cret-pw" not in caplog.text
