"""Every revision runs on a SQLite database that already holds models, foreign keys on.

A revision that rebuilds a table on SQLite (batch mode: copy, drop, rename) fails once rows of
other tables refer to it, which an empty test database never shows. This one is filled at the
first revision with tables, every table of it referring to another, then upgraded to head one
revision at a time, checking the foreign keys and the rows after each step.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, MetaData, insert, text

from service.db.migrate import alembic_config
from service.db.session import create_db_engine
from tests.service.db.test_migrations import _differences, _row

FIRST_WITH_TABLES = "0002_schema"
# Rows per table written at FIRST_WITH_TABLES; each must still be there at head.
COUNTS = {
    "datasets": 2,
    "dataset_columns": 2,
    "jobs": 3,
    "models": 3,
    "model_artifacts": 3,
    "importances": 3,
}


def _populate(connection: Connection) -> None:
    tables = MetaData()
    tables.reflect(connection, only=list(COUNTS))

    def add(name: str, **values: object) -> None:
        table = tables.tables[name]
        connection.execute(insert(table).values(_row(table, **values)))

    for d in range(2):
        add("datasets", id=f"d{d}")
        add("dataset_columns", dataset_id=f"d{d}", position=0, kind="numeric", data=b"\x00")
    for j in range(3):
        add("jobs", id=f"j{j}", dataset_id=f"d{j % 2}", status="succeeded", progress=1.0)
        add("models", id=f"m{j}", job_id=f"j{j}", dataset_id=f"d{j % 2}")
        add("model_artifacts", model_id=f"m{j}", data=b"artifact", sha256="0" * 64)
        add("importances", id=f"i{j}", model_id=f"m{j}", kind="impurity")


def _check(connection: Connection, revision: str) -> None:
    assert connection.execute(text("PRAGMA foreign_keys")).scalar() == 1
    violations = connection.execute(text("PRAGMA foreign_key_check")).all()
    assert violations == [], f"after {revision}: {violations}"
    for table, count in COUNTS.items():
        found = connection.execute(text(f"SELECT count(*) FROM {table}")).scalar()
        assert found == count, f"after {revision}: {table} has {found} rows, not {count}"


def test_each_revision_upgrades_a_populated_database_with_foreign_keys_on(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'populated.db'}"
    config = alembic_config(url)
    script = ScriptDirectory.from_config(config)
    order = [revision.revision for revision in reversed(list(script.walk_revisions()))]
    command.upgrade(config, FIRST_WITH_TABLES)
    engine = create_db_engine(url)  # foreign keys on, as the service and migrations run
    try:
        with engine.begin() as connection:
            _populate(connection)
        for revision in order[order.index(FIRST_WITH_TABLES) + 1 :]:
            command.upgrade(config, revision)
            with engine.connect() as connection:
                _check(connection, revision)
        with engine.connect() as connection:
            # 0006: columns stored before it have no distribution (not computed).
            stored = connection.execute(text("SELECT distribution FROM dataset_columns")).all()
            assert stored == [(None,)] * COUNTS["dataset_columns"]
        assert _differences(engine) == []
    finally:
        engine.dispose()
