"""Which backend runs the parallel parts of a fit: local processes, or a Dask cluster.

``with parallel_backend(client): model.fit(X, y)`` routes every executor the engine makes
inside the block (forests' trees, combiners' members and folds, …) and boosting's histograms
to the cluster behind a ``distributed.Client``. The choice lives in a context variable, so it
follows the code that set it (one thread, one task) and never leaks into other fits running
beside it. This module imports nothing from ``distributed``: the Dask backend's module is
imported only when a client is handed over, so the engine works without Dask installed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import Any, Protocol

from numpy.typing import NDArray

from engine.parallel._executor import Executor

__all__ = ["Backend", "HistogramSource", "TreeHistograms", "active_backend", "parallel_backend"]


class HistogramSource(Protocol):
    """Builds one tree's node histograms somewhere else (data-parallel boosting).

    A source holds the training rows in partitions; :meth:`tree` hands it one tree's rows
    and channels, and the returned callable builds a batch's histograms from them.
    """

    def tree(self, rows: NDArray[Any], channels: NDArray[Any]) -> TreeHistograms:
        """Start a tree grown on ``rows`` (indices into the source's binned matrix)."""
        ...


class TreeHistograms(Protocol):
    def __call__(
        self, rows: NDArray[Any], slot_of_row: NDArray[Any], n_slots: int, features: NDArray[Any]
    ) -> NDArray[Any]:
        """Histograms (S, F, 256, 1 + C) of the tree rows ``rows`` grouped by ``slot_of_row``."""
        ...


class Backend(Protocol):
    """What a non-local backend provides to the estimators."""

    name: str

    def executor(self, shared: Mapping[str, NDArray[Any]], n_tasks: int) -> Executor:
        """An executor for ``n_tasks`` independent tasks over ``shared``."""
        ...

    def histograms(self, binned: NDArray[Any]) -> AbstractContextManager[HistogramSource]:
        """A histogram source over ``binned`` (n_rows, n_features) for one boosting fit."""
        ...


_ACTIVE: ContextVar[Backend | None] = ContextVar("coppice_parallel_backend", default=None)


def active_backend() -> Backend | None:
    """The backend set by the innermost :func:`parallel_backend`, or None (local)."""
    return _ACTIVE.get()


@contextmanager
def parallel_backend(client: Any) -> Iterator[Backend]:
    """Run the parallel parts of fits inside the block on a Dask cluster.

    Parameters
    ----------
    client : distributed.Client
        A connected client. Every executor made inside the block runs its tasks on the
        client's cluster (``n_jobs`` is then ignored: the cluster's size decides), and
        XGBoost-style boosting builds its histograms on the cluster's workers.

    Examples
    --------
    >>> from distributed import Client  # doctest: +SKIP
    >>> with parallel_backend(Client("tcp://scheduler:8786")):  # doctest: +SKIP
    ...     forest.fit(X, y)
    """
    # Imported here, not at module level: only a caller with a Client needs distributed.
    from engine.parallel._dask import DaskBackend

    token = _ACTIVE.set(DaskBackend(client))
    try:
        yield _ACTIVE.get()  # type: ignore[misc]  # just set, never None here
    finally:
        _ACTIVE.reset(token)
