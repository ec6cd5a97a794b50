"""What a non-local backend provides, as protocols: the executor maker and the histogram source.

Kept apart from :mod:`engine.parallel._backend` (which chooses the backend) so that a backend
implementing them, such as :mod:`engine.parallel._dask`, imports only these and never the
module that imports it on demand: the two would otherwise form an import cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol

from numpy.typing import NDArray

from engine.parallel._executor import Executor

__all__ = ["Backend", "HistogramSource", "TreeHistograms"]


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
