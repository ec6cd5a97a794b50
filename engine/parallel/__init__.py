"""One executor interface for ``n_jobs``: run independent tasks serially or in worker processes.

An estimator hands :func:`make_executor` the large read-only arrays every task needs (the binned
training matrix, targets, weights) and then maps a module-level task function over small task
descriptions (seeds, indices)::

    with make_executor({"X_binned": X_binned, "y": y}, n_jobs, len(seeds)) as executor:
        for done, tree in enumerate(executor.map(_fit_one_tree, seeds), start=1):
            trees.append(tree)
            notify(callbacks, ProgressEvent(name, done, len(seeds)))  # may raise

Results arrive in task order as soon as they (and all earlier ones) are ready, so the caller can
report progress and stop early. Leaving the ``with`` block, or abandoning a ``map`` before its end
(the consumer stops, a task raises, a worker dies), terminates the workers at once and frees the
shared memory. The serial and the process executor compute the same results in the same order;
any other backend only has to honour :class:`Executor`. Inside ``with parallel_backend(client)``
the executors run their tasks on a Dask cluster instead (:mod:`engine.parallel._dask`, imported
only then), with the same results in the same order.
"""

from __future__ import annotations

import multiprocessing
import numbers
import os
from collections.abc import Mapping
from typing import Any

from numpy.typing import NDArray

from engine.parallel._backend import (
    Backend,
    HistogramSource,
    TreeHistograms,
    active_backend,
    parallel_backend,
)
from engine.parallel._executor import (
    Executor,
    SerialExecutor,
    SharedData,
    WorkerCrashedError,
)
from engine.parallel._parts import DataPart, KeptRows, PartReader, PartRows
from engine.parallel._prediction import prediction_threads, set_prediction_threads
from engine.parallel._process import ProcessExecutor
from engine.process_setup import default_start_method as default_start_method

__all__ = [
    "Backend",
    "DataPart",
    "Executor",
    "HistogramSource",
    "KeptRows",
    "PartReader",
    "PartRows",
    "ProcessExecutor",
    "SerialExecutor",
    "SharedData",
    "TreeHistograms",
    "WorkerCrashedError",
    "active_backend",
    "make_executor",
    "parallel_backend",
    "predict_threads",
    "prediction_threads",
    "resolve_n_jobs",
]


def _available_cpus() -> int:
    # Affinity respects `taskset` and CPU sets of containers, which os.cpu_count() ignores.
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def resolve_n_jobs(n_jobs: int | None) -> int:
    """The number of worker processes ``n_jobs`` asks for.

    ``None`` means 1, ``-1`` all available CPUs, ``-k`` all but ``k - 1`` of them (at least 1),
    as in joblib and scikit-learn. ``0`` is refused.
    """
    if n_jobs is None:
        return 1
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral):
        raise TypeError(f"n_jobs must be an int or None; got {n_jobs!r}.")
    n_jobs = int(n_jobs)
    if n_jobs == 0:
        raise ValueError("n_jobs=0 runs nothing; use 1 (or None) for serial, -1 for all CPUs.")
    if n_jobs < 0:
        return max(1, _available_cpus() + 1 + n_jobs)
    return n_jobs


def predict_threads(n_jobs: int | None) -> int:
    """Threads a tree ensemble's predict uses: the caller's :func:`prediction_threads` when
    set, else its ``n_jobs`` resolved."""
    chosen = set_prediction_threads()
    return resolve_n_jobs(n_jobs) if chosen is None else chosen


def make_executor(shared: Mapping[str, NDArray[Any]], n_jobs: int | None, n_tasks: int) -> Executor:
    """The executor for ``n_tasks`` tasks under ``n_jobs``: in-process unless it can help.

    Never starts more workers than there are tasks; one worker or one task runs serially.
    Inside :func:`parallel_backend` more than one task runs on that backend, whatever
    ``n_jobs`` says (the cluster's size decides). A daemonic process (a Dask worker under its
    nanny, a pool's worker) may not start processes of its own, so there every fit runs its
    tasks serially: a combiner's member with ``n_jobs=2`` fitted as a Dask task would
    otherwise fail with "daemonic processes are not allowed to have children".
    """
    backend = active_backend()
    if backend is not None and n_tasks > 1:
        return backend.executor(shared, n_tasks)
    n_workers = min(resolve_n_jobs(n_jobs), n_tasks)
    if n_workers <= 1 or multiprocessing.current_process().daemon:
        return SerialExecutor(shared)
    return ProcessExecutor(shared, n_workers)
