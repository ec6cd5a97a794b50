"""Each replica's memory of what references resolved to, kept briefly or until told otherwise.

Loaded models are cached by model id (``service.models.cache``); this caches the step before,
reference → model id, so a prediction through ``churn@production`` reads nothing from the
database most of the time. An entry lives ``poll_seconds`` (SQLite: the replicas poll), or
``pushed_seconds`` while a PostgreSQL listener is connected and drops a name's entries as soon
as another replica commits a change to it (``service.registry.listener``). Either way a moved
alias is served everywhere within ``REGISTRY_BOUND_SECONDS``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

# What the API promises: after an alias moves, every replica serves the new version within it.
REGISTRY_BOUND_SECONDS = 2.0
# Polling: a resolution is re-read at most this old, half the bound, leaving the rest for the
# request that was already in flight.
POLL_SECONDS = 1.0
# Notified: entries are dropped on notice, and this only limits the harm of a lost notice.
PUSHED_SECONDS = 30.0
# References remembered at most; /v2 remembers names that are not registered too (as model
# ids), so without a bound a client inventing names would grow the cache without end.
MAX_ENTRIES = 10_000


@dataclass(frozen=True, slots=True)
class Resolved:
    """What a reference named: a model, and the registered name and version it came through."""

    model_id: str
    name: str | None = None
    version: int | None = None


class ReferenceCache:
    """Reference text → ``Resolved``, each entry with its own expiry; thread-safe."""

    def __init__(
        self, poll_seconds: float = POLL_SECONDS, pushed_seconds: float = PUSHED_SECONDS
    ) -> None:
        self.poll_seconds = poll_seconds
        self.pushed_seconds = pushed_seconds
        self._entries: dict[str, tuple[Resolved, float, str]] = {}
        self._lock = threading.Lock()
        # Bumped by every invalidation; a resolution read before one is not stored after it,
        # or an answer read just before a move could outlive the move's notice.
        self._generation = 0
        self._pushed = False

    @property
    def pushed(self) -> bool:
        return self._pushed

    def set_pushed(self, pushed: bool) -> None:
        """Whether a listener now delivers every change; either way, forget everything, since
        changes may have gone unnoticed while it was (dis)connecting."""
        with self._lock:
            self._pushed = pushed
            self._drop_all()

    def generation(self) -> int:
        with self._lock:
            return self._generation

    def get(self, ref: str) -> Resolved | None:
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(ref)
            if entry is None:
                return None
            if entry[1] <= now:
                del self._entries[ref]
                return None
            return entry[0]

    def put(self, ref: str, resolved: Resolved, name: str, generation: int) -> None:
        """Keep ``resolved`` for ``ref`` (a reference through registered ``name``), unless an
        invalidation happened since ``generation`` was read."""
        with self._lock:
            if generation != self._generation:
                return
            now = time.monotonic()
            if len(self._entries) >= MAX_ENTRIES:
                self._entries = {k: e for k, e in self._entries.items() if e[1] > now}
                if len(self._entries) >= MAX_ENTRIES:
                    self._entries.clear()  # rare; each reference is read again once
            ttl = self.pushed_seconds if self._pushed else self.poll_seconds
            self._entries[ref] = (resolved, now + ttl, name)

    def invalidate(self, name: str) -> None:
        """Forget every reference through ``name``."""
        with self._lock:
            self._generation += 1
            for ref in [ref for ref, entry in self._entries.items() if entry[2] == name]:
                del self._entries[ref]

    def clear(self) -> None:
        with self._lock:
            self._drop_all()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def _drop_all(self) -> None:
        self._generation += 1
        self._entries.clear()
