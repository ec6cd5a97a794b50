"""Settings come from COPPICE_* variables, with defaults that run on one machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.config import Settings


def test_database_defaults_to_sqlite_in_data_dir(coppice_env: Path) -> None:
    settings = Settings()

    assert settings.data_dir == coppice_env
    assert settings.resolved_database_url == f"sqlite:///{coppice_env.resolve() / 'coppice.db'}"


def test_relative_data_dir_gives_an_absolute_database_path(
    coppice_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(coppice_env)
    monkeypatch.setenv("COPPICE_DATA_DIR", "relative")

    assert (
        Settings().resolved_database_url == f"sqlite:///{coppice_env.resolve()}/relative/coppice.db"
    )


def test_explicit_database_url_wins(coppice_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = "postgresql+psycopg://coppice:secret@db:5432/coppice"
    monkeypatch.setenv("COPPICE_DATABASE_URL", url)
    monkeypatch.setenv("COPPICE_PORT", "9001")

    settings = Settings()

    assert settings.resolved_database_url == url
    assert settings.port == 9001
