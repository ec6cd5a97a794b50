"""Waiting for the database at start-up, so start order does not matter.

In a compose file or a cluster the database often comes up after the service (or is briefly
away during a failover); ``coppice serve`` and ``coppice worker`` wait for it with a growing
pause and a log line per attempt, instead of exiting with a traceback.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from service.db.session import create_db_engine

logger = logging.getLogger(__name__)

FIRST_DELAY_SECONDS = 0.5
MAX_DELAY_SECONDS = 10.0


def wait_for_database(
    database_url: str,
    *,
    sleep: Callable[[float], None] = time.sleep,
    max_delay: float = MAX_DELAY_SECONDS,
) -> int:
    """Return once ``SELECT 1`` succeeds on ``database_url``; the failed attempts before it.

    Only errors of reaching the database are waited out (refused connections, a server still
    starting, a database not created yet); a malformed URL or a missing driver raises at once.
    """
    shown = make_url(database_url).render_as_string(hide_password=True)
    engine = create_db_engine(database_url)
    delay = FIRST_DELAY_SECONDS
    failures = 0
    started = time.monotonic()
    try:
        while True:
            try:
                with engine.connect() as connection:
                    connection.execute(text("SELECT 1"))
            except DBAPIError as error:
                failures += 1
                logger.warning(
                    "database %s unreachable (%s); trying again in %.1f s",
                    shown,
                    _reason(error),
                    delay,
                )
                sleep(delay)
                delay = min(delay * 2, max_delay)
                continue
            if failures:
                logger.info("database %s reachable after %.1f s", shown, time.monotonic() - started)
            return failures
    finally:
        engine.dispose()


def _reason(error: DBAPIError) -> str:
    """The driver's first line (host and port, never the password), for the log."""
    lines = str(error.orig).strip().splitlines()
    return lines[0] if lines else type(error.orig).__name__
