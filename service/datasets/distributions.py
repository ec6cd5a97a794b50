"""A column's distribution, computed once at ingest and shown on the console's dataset page.

Numeric columns get a histogram of their present values: ``HISTOGRAM_BINS`` equal-width bins
from the smallest value to the largest, with the edges and counts ``np.histogram(values,
bins=HISTOGRAM_BINS)`` gives (every bin half-open but the last, which holds the largest
value). Two cases NumPy refuses get an answer instead: a constant column is one bin whose two
edges are its value (NumPy would invent a range of ±0.5, which does not even exist beyond
about 1e16), and a span too wide for float64 (``max - min`` overflows) or too narrow for
distinct edges is binned as well as float64 allows (edges that coincide merge, so fewer bins).

The histogram is counted from the column's present values sorted, which ``summarize`` sorts
anyway to count the distinct ones: a binary search per edge, no pass over the values and no
second copy of them. Everything returned is JSON-ready: lists of Python ints and finite floats.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from service.datasets.categories import top_indices

HISTOGRAM_BINS = 20
TOP_CATEGORIES = 10


def bin_edges(low: float, high: float, bins: int = HISTOGRAM_BINS) -> npt.NDArray[np.float64]:
    """Ascending edges of equal-width bins from ``low`` to ``high`` (both finite, low <= high).

    The edges ``np.histogram`` uses when it can make ``bins`` bins; otherwise see the module's
    docstring. Always at least two edges, the first ``low`` and the last ``high``.
    """
    if low == high:
        return np.array([low, high])
    with np.errstate(over="ignore", invalid="ignore"):
        edges = np.linspace(low, high, bins + 1)
    if not np.isfinite(edges).all():
        # high - low overflows: space the halves, then double them (exact for such magnitudes).
        edges = np.linspace(low / 2, high / 2, bins + 1) * 2
        edges[0], edges[-1] = low, high
    # Values a few ULPs apart cannot have `bins` distinct edges: coinciding ones merge.
    return np.unique(edges)


def histogram(sorted_values: npt.NDArray[np.float64]) -> dict[str, list[Any]]:
    """``{"edges", "counts"}`` of ascending, finite ``sorted_values``; empty lists for none."""
    if not sorted_values.size:
        return {"edges": [], "counts": []}
    edges = bin_edges(float(sorted_values[0]), float(sorted_values[-1]))
    # Values below each inner edge; the last bin is closed, so it ends at the values' end.
    below = np.searchsorted(sorted_values, edges[1:-1], side="left")
    bounds = np.concatenate(([0], below, [sorted_values.size]))
    return {"edges": edges.tolist(), "counts": np.diff(bounds).tolist()}


def count_distinct_sorted(sorted_values: npt.NDArray[np.float64]) -> int:
    """Distinct values of an ascending array (``-0.0`` and ``0.0`` are one), as ``np.unique``."""
    if not sorted_values.size:
        return 0
    return int(np.count_nonzero(sorted_values[1:] != sorted_values[:-1])) + 1


def top_categories(
    counts: npt.NDArray[np.int32], categories: Sequence[str], k: int = TOP_CATEGORIES
) -> dict[str, Any]:
    """``{"top": [{"value", "count"}, ...], "n_other"}``: the ``k`` most frequent categories,
    most frequent first (ties in the categories' sorted order), and the present cells in all
    the others. ``counts`` has one entry a category (missing cells not among them)."""
    top = top_indices(counts, k).tolist()
    listed = [{"value": categories[i], "count": int(counts[i])} for i in top]
    n_present = int(counts.sum(dtype=np.int64))
    return {"top": listed, "n_other": n_present - sum(item["count"] for item in listed)}
