"""Starting processes that do the engine's work, and what each sets for itself first.

How a process is started (:func:`process_context`), how a dead one is described
(:func:`describe_exit`), and what a worker sets first (BLAS threads, allocator). The engine's
process pool (``engine.parallel``) uses all of it; the service's worker starts its fit
processes and describes their deaths with the same functions, and its fit processes limit
BLAS threads too, since they run fits side by side.
"""

from __future__ import annotations

import ctypes
import importlib
import multiprocessing
import os
import platform
import signal
import threading
from collections.abc import Sequence
from multiprocessing.context import BaseContext

__all__ = [
    "WORKER_ENVIRONMENT",
    "default_start_method",
    "describe_exit",
    "keep_freed_memory",
    "limit_blas_threads",
    "limit_malloc_arenas",
    "process_context",
    "trim_freed_memory",
]


def default_start_method(*, allow_fork: bool = True) -> str:
    """``fork`` in a single-threaded process; otherwise ``forkserver`` (else ``spawn``).

    Forking a process that runs threads (a web server, a job worker with a heartbeat thread)
    copies locks other threads hold, and the child can deadlock on them; there
    ``forkserver`` forks workers from a clean single-threaded server process instead. A
    process with no other thread forks safely, and fork spares a plain script the
    ``if __name__ == "__main__":`` guard that ``forkserver`` and ``spawn`` require (they
    re-import the main module in every worker). ``allow_fork=False`` is for a caller that
    keeps the context and starts processes later, when threads may have started.
    """
    methods = multiprocessing.get_all_start_methods()
    if allow_fork and "fork" in methods and threading.active_count() == 1:
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


def process_context(
    preload: Sequence[str], *, method: str | None = None, allow_fork: bool = True
) -> BaseContext:
    """A context whose processes start with the modules ``preload`` names already imported.

    The modules are imported where processes are forked from: by the fork server when it
    starts (which only takes effect if this call starts it: the server is one per process),
    or by this process before it forks. Importing them once there spares every child the
    import, and a module that loads the compiled kernels (``engine._preload``) spares each
    child Numba's start-up. Under ``spawn`` every child imports what it needs itself.

    Parameters
    ----------
    preload : sequence of str
        Module names, imported in order.
    method : {"fork", "forkserver", "spawn"}, optional
        Defaults to :func:`default_start_method`.
    allow_fork : bool
        Passed to :func:`default_start_method` when ``method`` is not given.
    """
    context = multiprocessing.get_context(method or default_start_method(allow_fork=allow_fork))
    if context.get_start_method() == "forkserver":
        context.set_forkserver_preload(list(preload))
    elif context.get_start_method() == "fork":
        for name in preload:
            importlib.import_module(name)
    return context


def describe_exit(exitcode: int | None) -> str:
    """A process's end in words, to follow its name.

    E.g. ``"was killed by signal 9 (SIGKILL, often the out-of-memory killer)"`` or ``"exited
    with code 3"``; ``exitcode`` is ``multiprocessing``'s (a negative number is the signal).
    """
    if exitcode is None:
        return "is still running"
    if exitcode < 0:
        number = -exitcode
        try:
            name = signal.Signals(number).name
        except ValueError:
            return f"was killed by signal {number}"
        hint = ", often the out-of-memory killer" if number == signal.SIGKILL else ""
        return f"was killed by signal {number} ({name}{hint})"
    return f"exited with code {exitcode}"


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
_M_ARENA_MAX = -8
WORKER_MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's largest
WORKER_TRIM_THRESHOLD = 256 * 1024 * 1024


def _glibc() -> ctypes.CDLL | None:
    """This process's C library when it is glibc (whose ``mallopt`` and ``malloc_trim`` the
    functions below call), else None: elsewhere they do nothing."""
    if platform.libc_ver()[0] != "glibc":
        return None
    return ctypes.CDLL(None)  # this process's symbols, glibc's among them (no ldconfig run)


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
    libc = _glibc()
    if libc is None:
        return False
    return bool(
        libc.mallopt(_M_MMAP_THRESHOLD, WORKER_MMAP_THRESHOLD)
        and libc.mallopt(_M_TRIM_THRESHOLD, WORKER_TRIM_THRESHOLD)
    )


def limit_malloc_arenas(arenas: int) -> bool:
    """Cap how many malloc arenas glibc gives this process's threads (``MALLOC_ARENA_MAX``).

    glibc gives a thread that finds the arenas busy an arena of its own, up to eight per core,
    and each keeps the memory its thread freed for that thread's next blocks. A server that
    runs requests on a pool of threads then holds one high-water mark per thread: an upload
    taken by a thread other than the one that took the last (which a busy machine makes
    likely) grows a fresh arena, and the same 15 MiB upload measured 0.6× its size in peak RSS
    growth on a quiet machine and 2.4× on a busy one, where the variance vanished with a
    single arena. Python's own objects come from pymalloc and Arrow's buffers from Arrow's
    pool, so few arenas cost the threads little contention; fewer arenas is also the usual
    advice for threaded Python servers. Must run before the process has started more than a
    few threads: glibc fixes its arena limit once eight arenas exist. An operator's own
    ``MALLOC_ARENA_MAX`` wins (glibc applied it at start). Returns whether it applied
    (glibc only; elsewhere a no-op).
    """
    libc = _glibc()
    if libc is None or "MALLOC_ARENA_MAX" in os.environ:
        return False
    return bool(libc.mallopt(_M_ARENA_MAX, arenas))


def trim_freed_memory() -> bool:
    """Give the pages of freed memory back to the system now (glibc's ``malloc_trim(0)``).

    For a process that has just dropped a large transient (a pass over a table's parts) and
    is about to allocate long-lived state of another shape: the freed blocks glibc would keep
    (up to :func:`keep_freed_memory`'s threshold, and whatever lies below the heap's top)
    would otherwise stay in the process's peak beside the new state. A few milliseconds.
    Returns whether it applied (glibc only; elsewhere a no-op).
    """
    libc = _glibc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True
