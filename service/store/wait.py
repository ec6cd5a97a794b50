"""Waiting for the data store at start-up, as for the database (``service.db.wait``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from service.store.errors import StoreUnavailable
from service.store.store import DataStore

logger = logging.getLogger(__name__)

FIRST_DELAY_SECONDS = 0.5
MAX_DELAY_SECONDS = 10.0


def wait_for_store(
    store: DataStore,
    *,
    sleep: Callable[[float], None] = time.sleep,
    max_delay: float = MAX_DELAY_SECONDS,
    max_attempts: int | None = None,
) -> int:
    """Return once the store's root can be listed; the failed attempts before it.

    ``max_attempts`` bounds the wait (tests); ``None`` waits as long as it takes, with a
    growing pause and a log line per attempt, so start order in a compose stack never matters.
    Raises the last ``StoreUnavailable`` when the attempts run out.
    """
    delay = FIRST_DELAY_SECONDS
    failures = 0
    started = time.monotonic()
    while True:
        try:
            store.check()
        except StoreUnavailable as error:
            failures += 1
            if max_attempts is not None and failures >= max_attempts:
                raise
            logger.warning("%s Trying again in %.1f s.", error.detail, delay)
            sleep(delay)
            delay = min(delay * 2, max_delay)
            continue
        if failures:
            logger.info(
                "data store %s reachable after %.1f s", store.url, time.monotonic() - started
            )
        return failures
