"""Threads for the compiled kernels within one fit.

Boosting is sequential across trees, so its ``n_jobs`` parallelises inside each tree: the
kernels release the GIL, and the features of a histogram batch are shared out among a few
threads, each filling its own features' histograms, so the result does not depend on the
number of threads. A tree grown in one compiled call (:mod:`engine.tree.grow.whole_tree`)
shares its steps out inside the call, on Numba's own pool (:func:`parallel_kernel_threads`),
as many threads as the fit's pool has. The pool lives for one fit only: an idle pool left behind would make
every later process pool of the engine fork from a multi-threaded process (unsafe), and
:func:`engine.parallel.default_start_method` would fall back to the slower fork server.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import contextmanager

from engine.parallel import resolve_n_jobs

__all__ = ["kernel_threads", "parallel_kernel_threads"]

# One parallel kernel at a time per process: Numba's workqueue pool (engine._kernels, where
# oneTBB is not installed) aborts the process when two threads launch parallel work at once.
_PARALLEL_KERNEL = threading.Lock()


@contextmanager
def kernel_threads(n_jobs: int | None) -> Iterator[ThreadPoolExecutor | None]:
    """A pool of ``n_jobs`` threads for one fit's kernels, or None for serial work."""
    n_threads = resolve_n_jobs(n_jobs)
    if n_threads <= 1:
        yield None
        return
    with ThreadPoolExecutor(n_threads, thread_name_prefix="coppice-kernel") as pool:
        yield pool


def pool_size(threads: Executor | None) -> int:
    """The number of threads of a :func:`kernel_threads` pool (1 for None)."""
    return 1 if threads is None else int(getattr(threads, "_max_workers", 1))


@contextmanager
def parallel_kernel_threads(n_threads: int) -> Iterator[int]:
    """Numba's thread count set for a parallel kernel called in this block; yields it.

    ``n_threads`` (a fit's ``n_jobs``, resolved) capped to Numba's pool, or 1, the serial
    kernel, when it asks for one or another thread of this process is in a parallel kernel.
    A forest's worker processes fit on one thread each, so they never wake the pool.
    """
    if n_threads <= 1 or not _PARALLEL_KERNEL.acquire(blocking=False):
        yield 1
        return
    try:
        import numba

        n_threads = min(n_threads, numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
        previous = numba.get_num_threads()
        numba.set_num_threads(n_threads)  # the calling thread's setting only
        try:
            yield n_threads
        finally:
            numba.set_num_threads(previous)
    finally:
        _PARALLEL_KERNEL.release()
