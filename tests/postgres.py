"""Throwaway PostgreSQL databases for tests that need the real server.

Shared by ``tests/service`` (the ``postgres_url`` fixture) and ``tests/e2e``; it imports only
SQLAlchemy, so the engine's tests never load it.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@contextmanager
def throwaway_database() -> Iterator[str]:
    """URL of a new, empty PostgreSQL database, dropped on exit.

    The server comes from ``COPPICE_TEST_POSTGRES_URL`` (default: the local one with trust
    auth); the calling test (or every test of a module-scoped fixture) is skipped when that
    server cannot be reached.
    """
    admin_url = make_url(os.environ.get("COPPICE_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL))
    # No pool: a test may restart the server, which cuts any connection kept for the drop.
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    name = f"coppice_test_{uuid.uuid4().hex[:12]}"
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    except OperationalError as error:
        admin.dispose()
        pytest.skip(f"PostgreSQL is not reachable: {error.orig}")
    try:
        yield admin_url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
