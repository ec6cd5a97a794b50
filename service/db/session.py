"""The database engine, and the two ways code outside a request opens a session on it.

A request's session comes from ``service.deps.get_session`` (one transaction per request).
Everything else — the worker, the search driver, a long-polling or cache-first endpoint —
uses :func:`reading` or :func:`transaction`, so every session in the service is opened in this
module or in that dependency.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

__all__ = ["SQLITE_BUSY_TIMEOUT_MS", "create_db_engine", "reading", "transaction"]


def create_db_engine(database_url: str) -> Engine:
    """Create the SQLAlchemy engine for ``database_url``.

    For a SQLite file the parent directory is created first, so the default configuration
    works on a fresh checkout without a setup step.
    """
    url = make_url(database_url)
    is_sqlite = url.get_backend_name() == "sqlite"
    if is_sqlite and url.database and url.database != ":memory:":
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, pool_pre_ping=not is_sqlite)
    if is_sqlite:
        event.listen(engine, "connect", _configure_sqlite_connection)
    return engine


# Milliseconds a SQLite writer waits for another's lock before "database is locked".
SQLITE_BUSY_TIMEOUT_MS = 30_000


def _configure_sqlite_connection(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        # SQLite ignores FOREIGN KEY clauses unless each connection opts in.
        cursor.execute("PRAGMA foreign_keys=ON")
        # The API, the worker and its fit processes share the file: with WAL, readers never
        # block the writer nor it them, and a busy writer makes others wait, not fail.
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode=WAL")
    finally:
        cursor.close()


@contextmanager
def reading(engine: Engine) -> Iterator[Session]:
    """A session for reads: each ``with`` block is a transaction of its own, so it sees the
    latest commit, and it connects only at its first query (a block that finds what it needs
    in a cache never touches the database)."""
    with Session(engine) as session:
        yield session


@contextmanager
def transaction(engine: Engine) -> Iterator[Session]:
    """One short unit of work: commits when the block ends, rolls back when it raises.
    Records stay readable after the commit (``expire_on_commit=False``)."""
    with Session(engine, expire_on_commit=False) as session, session.begin():
        yield session
