"""Migrations build the schema on SQLite and PostgreSQL, and match the ORM tables exactly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, MetaData, Table, insert, inspect, select, text
from sqlalchemy.orm import Session

from service.db.base import Base
from service.db.migrate import alembic_config, upgrade_to_head
from service.db.session import create_db_engine
from service.db.tables import DatasetRecord

TABLES = {"datasets", "dataset_columns", "jobs", "models", "model_artifacts", "importances"}


def _differences(engine: Engine) -> list[object]:
    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"compare_type": True, "render_as_batch": True}
        )
        return list(compare_metadata(context, Base.metadata))


def _check_schema(database_url: str) -> None:
    upgrade_to_head(database_url)
    engine = create_db_engine(database_url)
    try:
        assert set(inspect(engine).get_table_names()) >= TABLES
        assert _differences(engine) == [], "the migrations and service/db/tables.py differ"
        _check_timestamps_are_utc(engine)
    finally:
        engine.dispose()


def _check_timestamps_are_utc(engine: Engine) -> None:
    written = datetime(2030, 5, 6, 7, 8, 9, 123456, tzinfo=timezone(timedelta(hours=2)))
    with Session(engine) as session, session.begin():
        session.add(
            DatasetRecord(
                id="d",
                name="n",
                n_rows=1,
                n_columns=1,
                size_bytes=1,
                sha256="0" * 64,
                created_at=written,
            )
        )
    with Session(engine) as session:
        read = session.scalars(select(DatasetRecord.created_at)).one()
    assert read == written
    assert read.tzinfo is not None and read.utcoffset() == timedelta(0)


def test_upgrade_head_on_an_empty_sqlite_file(tmp_path: Path) -> None:
    _check_schema(f"sqlite:///{tmp_path / 'empty.db'}")


@pytest.mark.postgres
def test_upgrade_head_on_postgres(postgres_url: str) -> None:
    _check_schema(postgres_url)


def test_downgrade_to_base_and_back(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'roundtrip.db'}"
    upgrade_to_head(url)
    command.downgrade(alembic_config(url), "base")
    engine = create_db_engine(url)
    try:
        assert not TABLES & set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
    _check_schema(url)


def test_naive_datetimes_are_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'naive.db'}"
    upgrade_to_head(url)
    engine = create_db_engine(url)
    try:
        with pytest.raises(Exception, match="naive datetime"), Session(engine) as session:
            session.add(
                DatasetRecord(
                    id="d",
                    name="n",
                    n_rows=1,
                    n_columns=1,
                    size_bytes=1,
                    sha256="0" * 64,
                    created_at=datetime(2030, 1, 1),
                )
            )
            session.flush()
    finally:
        engine.dispose()


# --- 0003: jobs.max_runtime_seconds on a database that holds a job and its model --------------


def _row(table: Table, **values: Any) -> dict[str, Any]:
    """``values`` plus a placeholder of the right type for every other NOT NULL column."""
    placeholders = {
        bool: False,
        int: 1,
        float: 0.0,
        str: "x",
        dict: {},
        object: {},  # JSON as SQLite reflects it
        datetime: datetime(2030, 1, 1, tzinfo=UTC),
    }
    row = {
        column.name: placeholders[column.type.python_type]
        for column in table.columns
        if not column.nullable and column.name not in values
    }
    return row | values


def _check_runtime_limit_round_trip(url: str) -> None:
    config = alembic_config(url)
    command.upgrade(config, "0002_schema")
    engine = create_db_engine(url)
    try:
        tables = MetaData()
        tables.reflect(engine, only=["datasets", "jobs", "models"])
        with engine.begin() as connection:
            connection.execute(
                insert(tables.tables["datasets"]).values(
                    _row(tables.tables["datasets"], id="d-0003")
                )
            )
            connection.execute(
                insert(tables.tables["jobs"]).values(
                    _row(
                        tables.tables["jobs"],
                        id="j",
                        dataset_id="d-0003",
                        status="succeeded",
                        progress=1.0,
                    )
                )
            )
            connection.execute(
                insert(tables.tables["models"]).values(
                    _row(tables.tables["models"], id="m", job_id="j")
                )
            )

        command.upgrade(config, "head")
        with engine.begin() as connection:
            assert connection.execute(text("SELECT max_runtime_seconds FROM jobs")).all() == [
                (None,)
            ]
            connection.execute(text("UPDATE jobs SET max_runtime_seconds = 2.5"))
        command.downgrade(config, "0002_schema")  # with a model referring to the job
        assert "max_runtime_seconds" not in {c["name"] for c in inspect(engine).get_columns("jobs")}
        with engine.connect() as connection:
            assert connection.execute(text("SELECT job_id FROM models")).all() == [("j",)]
        command.upgrade(config, "head")
        assert _differences(engine) == []
    finally:
        engine.dispose()


def test_job_runtime_limit_migrates_both_ways_with_data_on_sqlite(tmp_path: Path) -> None:
    _check_runtime_limit_round_trip(f"sqlite:///{tmp_path / 'limits.db'}")


@pytest.mark.postgres
def test_job_runtime_limit_migrates_both_ways_with_data_on_postgres(postgres_url: str) -> None:
    _check_runtime_limit_round_trip(postgres_url)
