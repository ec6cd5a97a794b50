"""Compiled kernels and their NumPy twins: which of the two the engine runs.

The engine's hot loops (histograms, split search, row partitioning, tree traversal, …) are
Numba-compiled functions over plain arrays. Each keeps a NumPy twin that computes the same
result with array operations; tests hold the pair equal on random inputs, and setting
``COPPICE_ENGINE_KERNELS=numpy`` runs the whole engine on the twins (to debug a kernel, or on a
platform Numba does not support). The choice is read once, when this module is imported.

Kernels are compiled with ``cache=True`` so the machine code is written to disk and a new
process loads it instead of compiling again, and with ``nogil=True`` so threads can run kernels
side by side. Numba keys a cached kernel on its own source file only: a kernel whose helper in
another module changed would load stale machine code. So the cache lives in a directory named
after a digest of every kernel module's source and of the engine modules they import
(:func:`kernel_cache_dir`): any change to any kernel, or to a constant one reads, starts a
fresh cache.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

__all__ = [
    "KERNELS_ENV",
    "compiled_kernels",
    "inline_kernel",
    "kernel",
    "kernel_cache_dir",
    "kernel_source_files",
    "kernels_defined",
    "parallel_kernel",
    "select",
]

KERNELS_ENV = "COPPICE_ENGINE_KERNELS"
_CHOICES = ("numba", "numpy")

F = TypeVar("F", bound=Callable[..., Any])

# Every kernel decorated so far (not the inlined helpers, which have no machine code of their
# own): the warm-up test checks that `engine.warmup` compiled each of them.
_DEFINED: list[Any] = []


def _read_choice() -> str:
    choice = os.environ.get(KERNELS_ENV, "numba").strip().lower() or "numba"
    if choice not in _CHOICES:
        raise ValueError(f"{KERNELS_ENV}={choice!r}: expected one of {', '.join(_CHOICES)}.")
    return choice


_CHOICE = _read_choice()


def compiled_kernels() -> bool:
    """Whether the engine runs its compiled kernels (else their NumPy twins)."""
    return _CHOICE == "numba"


_ENGINE = Path(__file__).resolve().parent
_KERNEL_MARKERS = ("@kernel", "@inline_kernel", "@parallel_kernel")


def _engine_imports(path: Path) -> set[Path]:
    """The engine modules ``path`` imports from (absolute ``engine.`` imports only)."""
    found: set[Path] = set()
    for node in ast.walk(ast.parse(path.read_bytes())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] != "engine":
                continue
            base = _ENGINE.joinpath(*parts[1:])
            for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                if candidate.is_file():
                    found.add(candidate)
    return found


def kernel_source_files() -> list[Path]:
    """The sources compiled kernels depend on: every module holding a kernel, and every
    engine module those import from (Numba freezes a module-level constant a kernel reads,
    such as the missing-value code, into the kernel's machine code)."""
    kernel_modules = [
        path
        for path in _ENGINE.rglob("*.py")
        if any(marker.encode() in path.read_bytes() for marker in _KERNEL_MARKERS)
    ]
    sources = set(kernel_modules)
    for path in kernel_modules:
        sources |= _engine_imports(path)
    return sorted(sources)


@functools.cache
def kernel_cache_dir() -> Path:
    """Where compiled kernels are cached: ``NUMBA_CACHE_DIR`` (default: the engine's
    ``__pycache__/kernels``), in a subdirectory named after a digest of
    :func:`kernel_source_files`."""
    digest = hashlib.sha256()
    for path in kernel_source_files():
        digest.update(path.relative_to(_ENGINE).as_posix().encode())
        digest.update(path.read_bytes())
    base = os.environ.get("NUMBA_CACHE_DIR") or str(_ENGINE / "__pycache__" / "kernels")
    return Path(base) / f"coppice-{digest.hexdigest()[:16]}"


def _use_kernel_cache() -> None:
    import numba

    # Read when a kernel is decorated; Numba declares its settings dynamically.
    numba.config.CACHE_DIR = str(kernel_cache_dir())  # type: ignore[attr-defined]


def kernel(function: F) -> F:
    """Compile ``function`` with Numba (cached on disk, releasing the GIL).

    Compilation is lazy, at the first call with a given set of argument types, so importing
    the engine stays cheap; with the twins selected, nothing is compiled at all. NumPy's
    error model makes a division by zero give ±inf or NaN, as it does in the twins, instead
    of raising.
    """
    import numba

    _use_kernel_cache()
    compiled = numba.njit(cache=True, nogil=True, error_model="numpy")(function)
    _DEFINED.append(compiled)
    return cast(F, compiled)


# Numba's own thread pool for the parallel kernels. Its layers, in the order tried:
#
# * "tbb" (oneTBB, the `tbb` package): the calling thread takes a share of every parallel loop
#   and the pool's threads spin a little before they sleep, so a loop of the whole-tree kernel
#   costs microseconds to hand out. A binary 80k x 40, 100-tree boosting fit gained x1.29 from
#   a second thread with it against x1.13 with workqueue (quiet machine, benchmarks.wall_pairs).
#   It is safe across fork, which the engine needs: it forks forest and fit workers from
#   processes that may have run a parallel kernel.
# * "workqueue", Numba's own, where tbb is not installed (its wheels are for x86-64 only):
#   also fork-safe, but each loop hands off to the OS and back (~100-250 us a loop here).
# * "omp" only last, where neither loads (never, since workqueue always does): with GNU
#   OpenMP, a process forked from one that has merely loaded a parallel kernel aborts at its
#   first parallel loop (Numba's docs, "The Threading Layers"), and the service's fork server
#   loads every kernel.
#
# Workqueue is not safe for two parallel kernels launched at once from two threads of one
# process, so the callers take a process-wide lock whatever the layer
# (:func:`engine._threads.parallel_kernel_threads`). A user's NUMBA_THREADING_LAYER wins.
THREADING_LAYER_PRIORITY = ["tbb", "workqueue", "omp"]
_PARALLEL_PASSES = (
    "comprehension",
    "setitem",
    "reduction",
    "numpy",
    "stencil",
    "fusion",
    "inplace_binop",
)


@functools.cache
def _load_tbb() -> None:
    """Load oneTBB's library where pip put it, if it is there.

    pip installs the `tbb` package's shared libraries into ``<prefix>/lib``, where the dynamic
    loader does not look inside a virtual environment, so Numba's TBB layer would fail to
    load and Numba would quietly take the next layer. Loaded here by path first (and made
    global), the layer finds it by name.
    """
    import ctypes
    import sys

    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        library = Path(prefix) / "lib" / "libtbb.so.12"
        if library.is_file():
            try:
                ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)
            except OSError:
                continue  # a broken install: Numba takes the next layer
            return


def parallel_kernel(function: F) -> F:
    """Compile ``function`` as :func:`kernel` does, with its ``prange`` loops (its own or those
    of the :func:`inline_kernel` helpers it inlines) run on Numba's thread pool; call it
    under :func:`engine._threads.parallel_kernel_threads`. A serial kernel must not call a
    parallel one: see :mod:`engine.tree.grow.thread_kernels`."""
    import numba

    _use_kernel_cache()
    _load_tbb()  # also for a user's NUMBA_THREADING_LAYER=tbb
    if "NUMBA_THREADING_LAYER" not in os.environ:
        numba.config.THREADING_LAYER = "default"  # type: ignore[attr-defined]
        numba.config.THREADING_LAYER_PRIORITY = THREADING_LAYER_PRIORITY  # type: ignore[attr-defined]
    # Only explicit prange loops run in parallel: no array expression of the kernel becomes
    # parallel work behind the caller's back (a one-thread fit never wakes the pool).
    only_prange = dict.fromkeys(_PARALLEL_PASSES, False) | {"prange": True}
    # (Numba documents a dict of passes for ``parallel``; its type stubs say bool only.)
    jit = numba.njit(  # type: ignore[call-overload]
        cache=True, nogil=True, error_model="numpy", parallel=only_prange
    )
    compiled = jit(function)
    _DEFINED.append(compiled)
    return cast(F, compiled)


def kernels_defined() -> list[Any]:
    """The Numba dispatchers of every :func:`kernel` in the modules imported so far."""
    return list(_DEFINED)


def inline_kernel(function: F) -> F:
    """A small kernel that other kernels inline where they call it.

    Inlined at Numba's level, a helper taking array views costs no call and no reference
    counting: the scan of a histogram calls the criterion helpers once per bin, and as real
    calls they made it six times slower.
    """
    import numba

    _use_kernel_cache()
    compiled = numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")(function)
    return cast(F, compiled)


def select(compiled: F, twin: F) -> F:
    """The compiled kernel, or its NumPy twin under ``COPPICE_ENGINE_KERNELS=numpy``."""
    return compiled if compiled_kernels() else twin
