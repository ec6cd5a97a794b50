"""The Dask backend: an executor whose tasks run on a ``distributed`` cluster.

Imported only by :func:`engine.parallel.parallel_backend`, so ``distributed`` is needed only
by those who hand the engine a ``Client``.

The shared arrays are scattered once per executor (one fit) to every worker
(``broadcast=True``), never shipped with each task: joblib's automatic per-call scattering
filled schedulers' memory (joblib#1154), and a copy on every worker means losing any one
worker loses no data. Should every copy go (a one-worker cluster whose worker dies), Dask
cancels the tasks that needed them; the executor then scatters the arrays again and
resubmits the tasks not yet consumed. A task whose worker dies is rescheduled by Dask
itself. Results are consumed in task order, exactly as the local executors yield them, so the
same seed gives the same model here as with ``n_jobs=1``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
from numpy.typing import NDArray

try:
    from distributed import Client, Future
    from distributed.client import FutureCancelledError
    from distributed.scheduler import KilledWorker
except ImportError as missing:  # the optional extra is not installed
    raise ImportError(
        "engine.parallel_backend needs Dask's distributed package: pip install 'coppice[dask]'."
    ) from missing

from engine.parallel._backend_protocols import HistogramSource
from engine.parallel._dask_cluster import (
    MAX_RESCATTERS,
    ClusterLostError,
    check_connected,
    prepare_worker,
    scheduler_address,
)
from engine.parallel._dask_histograms import DaskHistograms
from engine.parallel._executor import (
    R,
    SharedData,
    ShutsDownOnExit,
    T,
    WorkerCrashedError,
    _read_only,
)

# ClusterLostError is the Dask backend's error; it is defined beside the client checks.
__all__ = ["ClusterLostError", "DaskBackend", "DaskExecutor"]


def _call(fn: Callable[[SharedData, T], R], shared: Mapping[str, NDArray[Any]], task: T) -> R:
    """A task on a Dask worker: ``fn`` on read-only views of the worker's copies."""
    prepare_worker()
    # Tasks on one worker share its copy of each array: a task writing into it would
    # change every later task's data, so tasks see read-only views, as locally.
    return fn(_read_only(shared), task)


class DaskExecutor(ShutsDownOnExit):
    """Runs tasks on a Dask cluster over arrays scattered once to every worker.

    Parameters
    ----------
    client : distributed.Client
    shared : mapping of str to ndarray
        Arrays every task needs; scattered at construction, released at :meth:`shutdown`.
    """

    def __init__(self, client: Client, shared: Mapping[str, NDArray[Any]]) -> None:
        check_connected(client)
        self._client = client
        self._arrays = {name: np.ascontiguousarray(array) for name, array in shared.items()}
        self._pending: list[Future | None] = []
        self._shared: dict[str, Future] = {}
        self._closed = False
        self._mapping = False
        self.n_rescatters = 0
        self._scatter()

    def _scatter(self) -> None:
        names = list(self._arrays)
        # hash=False: keys unique to this fit, so two fits of the same data never share (and
        # never release) each other's copies.
        futures = self._client.scatter(
            [self._arrays[name] for name in names], broadcast=True, hash=False
        )
        self._shared = dict(zip(names, futures, strict=True))

    def _submit(self, fn: Callable[[SharedData, T], R], task: T) -> Future:
        return self._client.submit(_call, fn, self._shared, task, pure=False)

    def map(self, fn: Callable[[SharedData, T], R], tasks: Sequence[T]) -> Iterator[R]:
        if self._closed:
            raise RuntimeError("This executor has been shut down.")
        if self._mapping:
            raise RuntimeError("This executor is already running a map; finish it first.")
        return self._run(fn, list(tasks))

    def _run(self, fn: Callable[[SharedData, T], R], tasks: list[T]) -> Iterator[R]:
        self._mapping = True
        finished = False
        try:
            # Every task is submitted at once: Dask's scheduler queues what its workers
            # cannot start yet, and a fit stopped early cancels the rest (shutdown).
            self._pending = [self._submit(fn, task) for task in tasks]
            for index in range(len(tasks)):
                result = self._result(fn, tasks, index)
                self._pending[index] = None  # release the result here
                yield result
            finished = True
        finally:
            self._mapping = False
            if not finished:
                self.shutdown()

    def _result(self, fn: Callable[[SharedData, T], R], tasks: list[T], index: int) -> R:
        while True:
            try:
                future = self._pending[index]
                assert future is not None
                return future.result()
            except FutureCancelledError:
                check_connected(self._client)
                if self._closed or self.n_rescatters >= MAX_RESCATTERS:
                    raise
                lost = [f for f in self._shared.values() if f.status != "finished"]
                if not lost:
                    raise
                # Every copy of a shared array went with its workers: send them again and
                # resubmit what is not yet consumed (finished results are kept).
                self.n_rescatters += 1
                self._client.cancel(list(self._shared.values()))
                self._scatter()
                for later in range(index, len(tasks)):
                    pending = self._pending[later]
                    if pending is None or pending.status != "finished":
                        self._pending[later] = self._submit(fn, tasks[later])
            except KilledWorker as exc:
                raise WorkerCrashedError(
                    f"Task {index} killed every Dask worker that ran it ({exc})."
                ) from exc
            except OSError as exc:  # the connection to the scheduler broke while waiting
                check_connected(self._client)
                raise ClusterLostError(str(exc)) from exc

    def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        outstanding = [f for f in self._pending if f is not None]
        outstanding += self._shared.values()
        self._pending, self._shared = [], {}
        if outstanding and self._client.status == "running":
            # Cancels queued and running tasks and releases the scattered copies.
            self._client.cancel(outstanding)


class DaskBackend:
    """What :func:`engine.parallel.parallel_backend` sets: a client, and how to use it."""

    name = "dask"

    def __init__(self, client: Client) -> None:
        if not isinstance(client, Client):
            raise TypeError(
                f"parallel_backend takes a distributed.Client; got {type(client).__name__}."
            )
        self.client = client

    @property
    def address(self) -> str:
        return scheduler_address(self.client)

    def executor(self, shared: Mapping[str, NDArray[Any]], n_tasks: int) -> DaskExecutor:
        return DaskExecutor(self.client, shared)

    def histograms(self, binned: NDArray[Any]) -> AbstractContextManager[HistogramSource]:
        return DaskHistograms(self.client, binned)
