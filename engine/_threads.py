"""Threads for work inside one tree.

Boosting grows its trees one after another, so its only parallelism is inside a tree. There the
heavy NumPy calls (``bincount`` over a feature's codes, fancy-index gathers) release the GIL,
so threads of one process share that work without copying the binned matrix to other
processes. Callers split work into independent parts whose results do not depend on which
thread runs them, so a model is bit-identical for every thread count.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["run_in_threads", "split_evenly"]

T = TypeVar("T")

_pools: dict[tuple[int, int], ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _pool(n_threads: int) -> ThreadPoolExecutor:
    # Keyed by pid too: a pool inherited through fork has no threads behind it in the child.
    key = (os.getpid(), n_threads)
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            pool = _pools[key] = ThreadPoolExecutor(n_threads, thread_name_prefix="coppice-tree")
        return pool


def run_in_threads(task: Callable[[T], None], parts: Sequence[T], n_threads: int) -> None:
    """Run ``task`` on every part, on up to ``n_threads`` threads; exceptions propagate.

    With one thread or one part everything runs in the caller's thread, with no pool at all.
    """
    if n_threads <= 1 or len(parts) <= 1:
        for part in parts:
            task(part)
        return
    for future in [_pool(n_threads).submit(task, part) for part in parts]:
        future.result()


def split_evenly(n_items: int, n_parts: int) -> list[range]:
    """``range(n_items)`` cut into at most ``n_parts`` contiguous, non-empty ranges."""
    n_parts = max(1, min(n_parts, n_items))
    bounds = [n_items * i // n_parts for i in range(n_parts + 1)]
    return [range(start, stop) for start, stop in itertools.pairwise(bounds)]
