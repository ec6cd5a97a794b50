"""A bounded, thread-safe LRU of loaded models, owned by the app's lifespan.

A model is loaded from its artifact once (after its SHA-256 is checked) and kept with what
predicting needs from its record (features, encoding, classes), so a prediction on a cached
model reads nothing from the database. The bound is the total artifact size in bytes, a
stand-in for the memory the loaded estimators take. An artifact larger than the whole bound
is used for its request and not kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class LoadedModel:
    """A usable estimator and the parts of its record that predict and explain need."""

    id: str
    method: str
    task: str
    target: str
    estimator: Any
    features: list[dict[str, Any]]
    encoding: dict[str, Any]
    classes: list[str] | None
    size_bytes: int
    # What requests derive from the fields above and would otherwise derive again each time
    # (``service.models.encoding.schema``: feature positions, category codes), by name. Filled
    # on first use; a race computes a value twice, never a wrong one. Not an init field, so
    # dataclasses.replace gives a changed copy an empty one.
    derived: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)


class ModelCache:
    """LRU of ``LoadedModel`` by model id, bounded by the sum of ``size_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, LoadedModel] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, model_id: str) -> LoadedModel | None:
        with self._lock:
            entry = self._entries.get(model_id)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(model_id)
            self.hits += 1
            return entry

    def get_or_load(self, model_id: str, load: Callable[[], LoadedModel]) -> LoadedModel:
        """The cached model, or ``load()``'s, kept for next time.

        ``load`` runs outside the lock (it reads the database and decodes the artifact), so two
        first requests for one model may both load it; the second simply replaces the first.
        """
        entry = self.get(model_id)
        if entry is not None:
            return entry
        entry = load()
        self.put(entry)
        return entry

    def put(self, entry: LoadedModel) -> None:
        with self._lock:
            self._remove(entry.id)
            if entry.size_bytes > self.max_bytes:
                return
            self._entries[entry.id] = entry
            self._bytes += entry.size_bytes
            while self._bytes > self.max_bytes:
                _, evicted = self._entries.popitem(last=False)
                self._bytes -= evicted.size_bytes

    def evict(self, model_id: str) -> None:
        with self._lock:
            self._remove(model_id)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def __contains__(self, model_id: object) -> bool:
        with self._lock:
            return model_id in self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    @property
    def total_bytes(self) -> int:
        with self._lock:
            return self._bytes

    def _remove(self, model_id: str) -> None:
        old = self._entries.pop(model_id, None)
        if old is not None:
            self._bytes -= old.size_bytes
