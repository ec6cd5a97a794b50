"""Threads for work inside one tree.

Boosting grows its trees one after another, so its only parallelism is inside a tree. There the
heavy NumPy calls (``bincount`` over a feature's codes) release the GIL, so threads of one
process share that work without copying the binned matrix to other processes. Callers split
work into independent parts whose results do not depend on which thread runs them, so a model
is bit-identical for every thread count.

The threads live only while one tree grows (:func:`tree_threads`): a process with idle threads
left over would make ``engine.parallel`` pick ``forkserver`` over ``fork`` for a later forest,
which a plain script without a ``__main__`` guard cannot use.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

__all__ = ["run_in_threads", "split_evenly", "tree_threads"]

T = TypeVar("T")


@contextmanager
def tree_threads(n_threads: int) -> Iterator[ThreadPoolExecutor | None]:
    """A pool of ``n_threads`` threads for one tree, shut down on exit; None for one thread."""
    if n_threads <= 1:
        yield None
        return
    with ThreadPoolExecutor(n_threads, thread_name_prefix="coppice-tree") as pool:
        yield pool


def run_in_threads(
    task: Callable[[T], None], parts: Sequence[T], pool: ThreadPoolExecutor | None
) -> None:
    """Run ``task`` on every part, in ``pool``'s threads; exceptions propagate.

    Without a pool, or with one part, everything runs in the caller's thread.
    """
    if pool is None or len(parts) <= 1:
        for part in parts:
            task(part)
        return
    for future in [pool.submit(task, part) for part in parts]:
        future.result()


def split_evenly(n_items: int, n_parts: int) -> list[range]:
    """``range(n_items)`` cut into at most ``n_parts`` contiguous, non-empty ranges."""
    n_parts = max(1, min(n_parts, n_items))
    bounds = [n_items * i // n_parts for i in range(n_parts + 1)]
    return [range(start, stop) for start, stop in itertools.pairwise(bounds)]
