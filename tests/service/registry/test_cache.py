"""The reference cache: entries expire, notices drop them, and a read racing one is not kept."""

from __future__ import annotations

import time

import pytest

from service.registry import cache as cache_module
from service.registry.cache import ReferenceCache, Resolved
from service.registry.listener import libpq_conninfo
from service.registry.references import RegistryRef, parse

CHURN_1 = Resolved("m1", "churn", 1)


def test_entries_live_the_polling_time_unless_a_listener_pushes_changes() -> None:
    cache = ReferenceCache(poll_seconds=0.05, pushed_seconds=60)
    cache.put("churn@production", CHURN_1, "churn", cache.generation())
    assert cache.get("churn@production") == CHURN_1
    time.sleep(0.06)
    assert cache.get("churn@production") is None
    cache.set_pushed(True)
    cache.put("churn@production", CHURN_1, "churn", cache.generation())
    time.sleep(0.06)
    assert cache.get("churn@production") == CHURN_1
    cache.set_pushed(False)  # the listener is gone: nothing it vouched for is kept
    assert len(cache) == 0


def test_a_notice_drops_the_names_entries_and_a_racing_read_is_not_kept() -> None:
    cache = ReferenceCache()
    cache.put("churn@production", CHURN_1, "churn", cache.generation())
    cache.put("fraud@1", Resolved("m2", "fraud", 1), "fraud", cache.generation())
    read_before = cache.generation()
    cache.invalidate("churn")
    assert cache.get("churn@production") is None
    assert cache.get("fraud@1") is not None
    # Read from the database before the notice, stored after it: it may be the old answer.
    cache.put("churn@production", CHURN_1, "churn", read_before)
    assert cache.get("churn@production") is None


def test_references_parse_on_their_last_at() -> None:
    assert parse("3f0c") is None
    assert parse("churn@production") == RegistryRef("churn", alias="production")
    assert parse("churn@12") == RegistryRef("churn", version=12)
    assert parse("churn@latest") == RegistryRef("churn", latest=True)
    assert parse("churn@١") == RegistryRef("churn", alias="١")  # not an ASCII digit
    assert str(parse("churn@12")) == "churn@12"


def test_the_listener_connects_with_libpq_urls() -> None:
    url = "postgresql+psycopg://user:p%40ss@db:5432/coppice?sslmode=require"
    assert libpq_conninfo(url) == "postgresql://user:p%40ss@db:5432/coppice?sslmode=require"


def test_the_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "MAX_ENTRIES", 3)
    cache = ReferenceCache()
    for i in range(5):
        cache.put(f"name{i}", Resolved(f"name{i}"), f"name{i}", cache.generation())
    assert len(cache) <= 3
    assert cache.get("name4") is not None
