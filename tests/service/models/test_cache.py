"""``ModelCache``: a thread-safe LRU bounded by total artifact bytes."""

from __future__ import annotations

import threading

from service.models.cache import LoadedModel, ModelCache


def entry(model_id: str, size: int) -> LoadedModel:
    return LoadedModel(
        id=model_id,
        method="random_forest",
        task="classification",
        target="label",
        estimator=object(),
        features=[],
        encoding={},
        classes=None,
        size_bytes=size,
    )


def test_least_recently_used_goes_first_when_bytes_run_out() -> None:
    cache = ModelCache(max_bytes=100)
    cache.put(entry("a", 40))
    cache.put(entry("b", 40))
    assert cache.get("a") is not None  # a is now the most recent

    cache.put(entry("c", 40))

    assert "b" not in cache and "a" in cache and "c" in cache
    assert cache.total_bytes == 80


def test_a_model_larger_than_the_bound_is_not_kept() -> None:
    cache = ModelCache(max_bytes=100)
    cache.put(entry("a", 40))

    loaded = cache.get_or_load("big", lambda: entry("big", 101))

    assert loaded.id == "big" and "big" not in cache and "a" in cache


def test_get_or_load_loads_once_then_hits() -> None:
    cache = ModelCache(max_bytes=100)
    loads = []

    def load() -> LoadedModel:
        loads.append(1)
        return entry("a", 10)

    first = cache.get_or_load("a", load)
    second = cache.get_or_load("a", load)

    assert first is second and len(loads) == 1
    assert (cache.hits, cache.misses) == (1, 1)


def test_evict_and_replace_keep_the_byte_count() -> None:
    cache = ModelCache(max_bytes=100)
    cache.put(entry("a", 30))
    cache.put(entry("a", 50))
    assert cache.total_bytes == 50 and len(cache) == 1

    cache.evict("a")
    cache.evict("never-there")

    assert cache.total_bytes == 0 and len(cache) == 0


def test_zero_bytes_keeps_nothing() -> None:
    cache = ModelCache(max_bytes=0)

    cache.put(entry("a", 1))

    assert len(cache) == 0


def test_concurrent_use_stays_within_the_bound() -> None:
    cache = ModelCache(max_bytes=1000)

    def work(worker: int) -> None:
        for i in range(500):
            model_id, size = f"{worker}-{i % 37}", 7 + i % 50
            cache.get_or_load(model_id, lambda m=model_id, s=size: entry(m, s))
            if i % 11 == 0:
                cache.evict(model_id)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert cache.total_bytes <= 1000
    assert cache.total_bytes == sum(
        e.size_bytes for e in (cache.get(k) for k in list(cache._entries)) if e
    )
