"""The PostgreSQL listener on a real server: a notice drops the name's entries, and a cut
connection empties the cache, which polls until the listener is back."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import psycopg
import pytest

from service.registry.cache import ReferenceCache, Resolved
from service.registry.listener import RegistryListener, libpq_conninfo
from service.registry.repository import NOTIFY_CHANNEL

pytestmark = pytest.mark.postgres


def _eventually(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _keep(cache: ReferenceCache, ref: str, name: str) -> None:
    cache.put(ref, Resolved(f"model-of-{ref}", name, 1), name, cache.generation())


def test_notices_drop_entries_and_a_cut_connection_falls_back_to_polling(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    cache = ReferenceCache(poll_seconds=60)  # long, so only the listener can drop entries
    listener = RegistryListener(postgres_url, cache)
    listener.start()
    try:
        with psycopg.connect(libpq_conninfo(postgres_url), autocommit=True) as admin:
            assert listener.wait_listening(10) and cache.pushed
            _keep(cache, "churn@production", "churn")
            _keep(cache, "fraud@1", "fraud")

            admin.execute("SELECT pg_notify(%s, 'churn')", (NOTIFY_CHANNEL,))

            assert _eventually(lambda: cache.get("churn@production") is None, 2.0)
            assert cache.get("fraud@1") is not None  # another name's entries stay

            # Cut the listener's connection as a failover or an idle timeout would.
            with caplog.at_level(logging.WARNING, logger="service.registry.listener"):
                cut = admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                ).fetchall()
                assert cut == [(True,)]
                # Nothing it vouched for survives: a notice may have been lost in the gap.
                assert _eventually(lambda: cache.get("fraud@1") is None, 2.0)
                assert _eventually(lambda: "registry listener disconnected" in caplog.text, 2.0)

            # Back (after 0.5 s): it trusts notices again, and they arrive.
            assert _eventually(lambda: cache.pushed and listener.wait_listening(0), 10.0)
            _keep(cache, "churn@2", "churn")
            admin.execute("SELECT pg_notify(%s, 'churn')", (NOTIFY_CHANNEL,))
            assert _eventually(lambda: cache.get("churn@2") is None, 2.0)
    finally:
        listener.stop()
