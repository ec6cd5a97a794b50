"""Which backend runs the parallel parts of a fit: local processes, or a Dask cluster.

``with parallel_backend(client): model.fit(X, y)`` routes every executor the engine makes
inside the block (forests' trees, combiners' members and folds, …) and boosting's histograms
to the cluster behind a ``distributed.Client``. The choice lives in a context variable, so it
follows the code that set it (one thread, one task) and never leaks into other fits running
beside it. This module imports nothing from ``distributed``: the Dask backend's module is
imported only when a client is handed over, so the engine works without Dask installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

# The protocols live in a module of their own, which the Dask backend imports without
# importing this one back; they are re-exported here, where engine.parallel reads them.
from engine.parallel._backend_protocols import Backend, HistogramSource, TreeHistograms

__all__ = ["Backend", "HistogramSource", "TreeHistograms", "active_backend", "parallel_backend"]


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
