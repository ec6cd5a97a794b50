"""Throwaway PostgreSQL databases for tests that need the real server.

Shared by ``tests/service`` (the ``postgres_url`` and ``postgres_settings`` fixtures) and
``tests/e2e``; it imports only SQLAlchemy, so the engine's tests never load it.

One test stops and starts the whole server (``tests/e2e/test_postgres_restart.py``), while
other tests may run at the same time: in other pytest-xdist workers, or in another pytest on
the same machine. So every use of the server is held under a lock file shared by all of them:
each throwaway database holds it shared for as long as it lives, and the restart holds it
exclusively (:func:`server_to_myself`), waiting for the databases in use to be dropped while
new ones wait for the restart to end.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def admin_url() -> URL:
    """The server's URL (``COPPICE_TEST_POSTGRES_URL`` or the local one with trust auth)."""
    return make_url(os.environ.get("COPPICE_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL))


# --- one lock per server, for every test process on this machine ---------------------------

# This process's shared hold: the open lock file and how many users share it. Nested users
# (a module's database, then a test's) share one hold, so a restart waiting between them
# cannot deadlock them.
_shared: IO[str] | None = None
_shared_users = 0
# Whether this process holds the server exclusively (then its own databases need no hold).
_exclusive = False


def _lock_path(suffix: str) -> Path:
    url = admin_url()
    name = f"coppice-tests-postgres-{url.host}-{url.port or 5432}.{suffix}"
    return Path(tempfile.gettempdir()) / name


def _open_lock(suffix: str) -> IO[str]:
    # A fresh open file description each time: flock locks belong to it, not to the process.
    return _lock_path(suffix).open("a")


@contextmanager
def server_in_use() -> Iterator[None]:
    """Hold the server shared: it is not restarted until every holder has let go."""
    global _shared, _shared_users
    if _exclusive:
        yield
        return
    if _shared_users == 0:
        lock = _open_lock("lock")
        # Through the turnstile, which a waiting restart keeps: it goes before newcomers.
        with _open_lock("turnstile") as turnstile:
            fcntl.flock(turnstile, fcntl.LOCK_EX)
            fcntl.flock(lock, fcntl.LOCK_SH)
        _shared = lock
    _shared_users += 1
    try:
        yield
    finally:
        _shared_users -= 1
        if _shared_users == 0 and _shared is not None:
            _shared.close()  # releases the lock
            _shared = None


@contextmanager
def server_to_myself() -> Iterator[None]:
    """Hold the server exclusively (to restart it): no database of another test is in use."""
    global _exclusive
    if _shared_users:
        raise RuntimeError("this process already uses the server; it would wait for itself")
    with _open_lock("turnstile") as turnstile, _open_lock("lock") as lock:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        fcntl.flock(lock, fcntl.LOCK_EX)
        _exclusive = True
        try:
            yield
        finally:
            _exclusive = False


# --- databases -----------------------------------------------------------------------------


def _admin_engine() -> Engine:
    # No pool: a test may restart the server, which cuts any connection kept for the drop.
    return create_engine(admin_url(), isolation_level="AUTOCOMMIT", poolclass=NullPool)


def create_database(template: str | None = None) -> str:
    """Create a new database (empty, or a copy of ``template``); returns its name.

    Skips the calling test (or every test of a module-scoped fixture) when the server cannot
    be reached. Call it while holding :func:`server_in_use`.
    """
    name = f"coppice_test_{uuid.uuid4().hex[:12]}"
    copy = f' TEMPLATE "{template}"' if template else ""
    admin = _admin_engine()
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"{copy}'))
    except OperationalError as error:
        pytest.skip(f"PostgreSQL is not reachable: {error.orig}")
    finally:
        admin.dispose()
    return name


def drop_database(name: str) -> None:
    admin = _admin_engine()
    try:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


def database_url(name: str) -> str:
    return admin_url().set(database=name).render_as_string(hide_password=False)


@contextmanager
def throwaway_database(template: str | None = None) -> Iterator[str]:
    """URL of a new database, dropped on exit: empty, or a copy of the ``template`` database.

    The server is held (:func:`server_in_use`) until the database is dropped. The calling
    test (or every test of a module-scoped fixture) is skipped when the server cannot be
    reached.
    """
    with server_in_use():
        name = create_database(template)
        try:
            yield database_url(name)
        finally:
            drop_database(name)
