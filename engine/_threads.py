"""Threads for the compiled kernels within one fit.

Boosting is sequential across trees, so its ``n_jobs`` parallelises inside each tree: the
kernels release the GIL, and the features of a histogram batch are shared out among a few
threads, each filling its own features' histograms, so the result does not depend on the
number of threads. The pool lives for one fit only: an idle pool left behind would make
every later process pool of the engine fork from a multi-threaded process (unsafe), and
:func:`engine.parallel.default_start_method` would fall back to the slower fork server.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from engine.parallel import resolve_n_jobs

__all__ = ["kernel_threads"]


@contextmanager
def kernel_threads(n_jobs: int | None) -> Iterator[ThreadPoolExecutor | None]:
    """A pool of ``n_jobs`` threads for one fit's kernels, or None for serial work."""
    n_threads = resolve_n_jobs(n_jobs)
    if n_threads <= 1:
        yield None
        return
    with ThreadPoolExecutor(n_threads, thread_name_prefix="coppice-kernel") as pool:
        yield pool
