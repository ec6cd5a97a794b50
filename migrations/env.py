"""Alembic environment: how revisions reach the database.

``service.db.migrate`` hands over an open connection in ``config.attributes``; the database
URL (from the same place, or from ``COPPICE_*`` settings) is the fallback for offline SQL
generation and for running Alembic by hand.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

import service.db.tables  # noqa: F401  (registers every table on Base.metadata)
from service.db.base import Base
from service.db.session import create_db_engine

config = context.config
target_metadata = Base.metadata


def _database_url() -> str:
    url = config.attributes.get("database_url") or config.get_main_option("sqlalchemy.url")
    if url:
        return str(url)
    from service.config import Settings

    return Settings().resolved_database_url


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things in place; batch mode recreates the table instead
        # and is a no-op on PostgreSQL.
        render_as_batch=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(
        url=_database_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_db_engine(_database_url())
    try:
        with engine.connect() as connection:
            _run(connection)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
