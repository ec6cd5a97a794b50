"""Deletes rely on the schema's ``ON DELETE``: every database holds every rule the ORM declares.

The repositories delete a parent row and let the database remove (``CASCADE``) or detach
(``SET NULL``) its children. That holds only if the migrated schema carries each rule and, on
SQLite, foreign keys are enforced, which SQLite does per connection when asked
(``service.db.session`` asks on every one).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, inspect, text

from service.config import Settings
from service.db.base import Base
from service.db.session import create_db_engine


@pytest.fixture(params=["sqlite", "postgres"])
def db_engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    name = "settings" if request.param == "sqlite" else "postgres_settings"
    settings: Settings = request.getfixturevalue(name)
    engine = create_db_engine(settings.resolved_database_url)
    yield engine
    engine.dispose()


def _declared() -> dict[tuple[str, str, str], str | None]:
    """(table, column, referred table) -> the ON DELETE rule the ORM tables declare."""
    rules: dict[tuple[str, str, str], str | None] = {}
    for table in Base.metadata.sorted_tables:
        for key in table.foreign_keys:
            rule = key.ondelete.upper() if key.ondelete else None
            rules[(table.name, key.parent.name, key.column.table.name)] = rule
    return rules


def _migrated(engine: Engine) -> dict[tuple[str, str, str], str | None]:
    inspector = inspect(engine)
    rules: dict[tuple[str, str, str], str | None] = {}
    for table in inspector.get_table_names():
        for key in inspector.get_foreign_keys(table):
            rule = key.get("options", {}).get("ondelete")
            for column in key["constrained_columns"]:
                rules[(table, column, key["referred_table"])] = rule.upper() if rule else None
    return rules


def test_every_on_delete_rule_is_in_the_migrated_schema(db_engine: Engine) -> None:
    declared = _declared()
    assert sum(rule == "CASCADE" for rule in declared.values()) >= 8  # the rules exist at all
    migrated = _migrated(db_engine)
    assert {key: migrated.get(key, "missing") for key in declared} == declared


def test_sqlite_enforces_foreign_keys_on_every_connection(settings: Settings) -> None:
    engine = create_db_engine(settings.resolved_database_url)
    try:
        for _ in range(3):  # new connections, not one reused
            with engine.connect() as connection:
                assert connection.execute(text("PRAGMA foreign_keys")).scalar() == 1
            engine.dispose()
    finally:
        engine.dispose()
