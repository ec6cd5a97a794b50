"""What a process that does the engine's work sets for itself first: BLAS threads, allocator.

The engine's worker processes apply all of it (``engine.parallel``); the service's fit
processes limit BLAS threads too, since they run fits side by side.
"""

from __future__ import annotations

import ctypes
import platform

__all__ = ["WORKER_ENVIRONMENT", "keep_freed_memory", "limit_blas_threads"]

# Applied in every worker. NumPy's BLAS sizes its thread pool when NumPy is imported, which in a
# worker happens before any code of ours runs (unpickling the worker's target imports
# engine.parallel, and this module with it), so these cannot shrink that pool; they do reach any
# threaded runtime loaded later.
# The pool that is already there is shrunk by limit_blas_threads() below.
WORKER_ENVIRONMENT = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
}


def limit_blas_threads(n_threads: int = 1) -> None:
    """Shrink the thread pools of the BLAS (and OpenMP) libraries already loaded in this process.

    The engine parallelises with processes; a BLAS pool of one thread per core inside each
    of them oversubscribes the machine, and the linear learners' small matrix products then
    spend more time waking threads than multiplying (35 ms instead of 0.3 ms was seen on a
    busy 2-core machine). ``threadpoolctl`` does this for every known BLAS; it is optional for
    the engine (NumPy stays its only requirement) and installed with the service.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # the engine alone: the pool keeps its size
        return
    threadpool_limits(limits=n_threads)


# glibc's mallopt parameters (malloc.h) and the values a worker uses; see keep_freed_memory().
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
WORKER_MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's largest
WORKER_TRIM_THRESHOLD = 256 * 1024 * 1024


def keep_freed_memory() -> bool:
    """Have glibc's allocator reuse freed memory in this process instead of unmapping it.

    Growing a tree allocates and drops arrays of a few hundred kB to tens of MB for every
    node. glibc serves blocks above its mmap threshold with fresh pages and returns them to
    the system on free; the threshold starts at 128 kB and rises only as the process frees
    large blocks, and freed memory past the trim threshold at the top of the heap goes back
    too. A worker whose allocator starts cold (one forked from a fork server's fresh child,
    as the service's fits are) faults in new pages for nearly every array: 1.1 M minor page
    faults and 3 s of system time in a 30-tree forest fit on 80,000 × 40, against 0.1 M when
    warm. Fixed thresholds — the largest mmap threshold glibc allows, and up to 256 MiB kept
    free before the heap is trimmed (64 MiB still let a full-depth tree on 80,000 rows fault
    120,000 times) — make every worker warm from the start. The cost is freed memory a
    worker keeps, up to 256 MiB, which its next arrays reuse rather than adding to.
    Returns whether it applied (glibc only; elsewhere a no-op).
    """
    if platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(None)  # this process's symbols, glibc's among them (no ldconfig run)
    return bool(
        libc.mallopt(_M_MMAP_THRESHOLD, WORKER_MMAP_THRESHOLD)
        and libc.mallopt(_M_TRIM_THRESHOLD, WORKER_TRIM_THRESHOLD)
    )
