"""PostgreSQL LISTEN/NOTIFY: a replica hears of every registry change as it is committed.

Each change to a registered name sends ``pg_notify('coppice_registry', name)`` in its own
transaction (``repository.notify``), delivered only if it commits. One thread per API replica
holds a connection that LISTENs and drops the named entries from its ``ReferenceCache``. While
it is connected the cache keeps entries long; when the connection is lost the cache is emptied
and falls back to polling (short entries) until the listener is back, so a lost notice can
never keep an old answer past the bound.
"""

from __future__ import annotations

import logging
import threading
import time

import psycopg
from sqlalchemy.engine import make_url

from service.registry.cache import ReferenceCache
from service.registry.repository import NOTIFY_CHANNEL

logger = logging.getLogger(__name__)

# How often the loop wakes to notice a stop (which waits for it: an app's shutdown, and every
# PostgreSQL test's, takes up to this long), and how often it proves the connection alive: a
# connection cut without a FIN would otherwise wait for notices forever while the cache trusts
# it. Waking ten times a second costs next to nothing.
WAKE_SECONDS = 0.1
PING_SECONDS = 5.0
MAX_BACKOFF_SECONDS = 10.0


def libpq_conninfo(database_url: str) -> str:
    """The libpq URL of a SQLAlchemy PostgreSQL URL (``postgresql+psycopg://`` → ``postgresql://``)."""
    url = make_url(database_url)
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


class RegistryListener:
    """A daemon thread that LISTENs for registry changes and invalidates ``cache``."""

    def __init__(self, database_url: str, cache: ReferenceCache) -> None:
        self._conninfo = libpq_conninfo(database_url)
        self._cache = cache
        self._stop = threading.Event()
        self._listening = threading.Event()
        self._thread = threading.Thread(target=self._run, name="registry-listener", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wait_listening(self, timeout: float) -> bool:
        """True once the listener is connected (tests, and start-up, may wait for it)."""
        return self._listening.wait(timeout)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=WAKE_SECONDS * 20)

    def _run(self) -> None:
        backoff = 0.5
        while not self._stop.is_set():
            try:
                self._listen()
                backoff = 0.5
            except psycopg.Error as error:
                # No URL in the message: it may carry a password.
                logger.warning(
                    "registry listener disconnected (%s); polling every %.1f s until it is back",
                    type(error).__name__,
                    self._cache.poll_seconds,
                )
            finally:
                self._listening.clear()
                self._cache.set_pushed(False)
            self._stop.wait(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)

    def _listen(self) -> None:
        with psycopg.connect(self._conninfo, autocommit=True, connect_timeout=5) as connection:
            connection.execute(f"LISTEN {NOTIFY_CHANNEL}")
            # Only now: a change committed before LISTEN took effect was never announced to
            # us, and set_pushed empties the cache, so nothing read before it survives.
            self._cache.set_pushed(True)
            self._listening.set()
            pinged = time.monotonic()
            while not self._stop.is_set():
                for notice in connection.notifies(timeout=WAKE_SECONDS):
                    self._cache.invalidate(notice.payload)
                if time.monotonic() - pinged >= PING_SECONDS:
                    connection.execute("SELECT 1")
                    pinged = time.monotonic()
