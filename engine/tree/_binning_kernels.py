"""BinMapper's kernels and their NumPy twins: a feature's present values, and bin codes.

:func:`present_values` splits ``X`` into each feature's non-missing values, in row order,
in one pass over the rows (``fit`` sorts them next); the twin masks each column.

:func:`bin_codes` maps raw values to bin codes (``transform``). A numeric value's code is the number of the feature's bin edges below it (``searchsorted``
with ``side="left"``, so ``x <= edges[b]`` ⇔ ``code <= b``); a categorical value's code is
its index among the feature's known categories. NaN, and categories never seen, take the
missing code. The kernel walks the rows once, each value found by a branch-free binary search
(Khuong & Morin 2017, "Array layouts for comparison-based searching": arithmetic on the
comparison at each halving instead of an unpredictable branch); the twin calls
``np.searchsorted`` per feature. The codes are the same integers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._kernels import kernel, select
from engine.tree._common import MAX_BINS

__all__ = ["bin_codes", "present_values"]


@kernel
def _count_below_narrow(table: NDArray[np.float64], row: int, x: float) -> int:
    """How many entries of ``table[row]`` are ``< x``: ``np.searchsorted`` (left) of ``x``.

    The row is ``MAX_BINS`` (255) wide and sorted up to where its padding starts (+inf for
    edges, NaN for categories: neither is ever ``< x``). Eight halvings of 256 positions,
    unrolled: a loop with a run-time count measured five times slower.
    """
    base = 0
    for step in (128, 64, 32, 16, 8, 4, 2, 1):
        base += step * (table[row, base + step - 1] < x)
    return base


@kernel
def _count_below(table: NDArray[np.float64], row: int, n: int, x: float) -> int:
    """How many of the sorted ``table[row, :n]`` are ``< x`` (any width)."""
    if n == 0:
        return 0
    base = 0
    while n > 1:
        half = n >> 1
        base += half * (table[row, base + half] < x)
        n -= half
    return base + (table[row, base] < x)


@kernel
def bin_codes_compiled(
    X: NDArray[np.float64],
    edges: NDArray[np.float64],
    n_edges: NDArray[np.intp],
    categories: NDArray[np.float64],
    n_categories: NDArray[np.intp],
    is_categorical: NDArray[np.bool_],
    missing: int,
    codes: NDArray[Any],
) -> None:
    """Write the codes of ``X`` (n_samples, n_features) into ``codes`` of the same shape.

    Row ``f`` of ``edges`` holds feature ``f``'s ``n_edges[f]`` sorted bin edges, then +inf;
    row ``f`` of ``categories`` (``MAX_BINS`` wide) its ``n_categories[f]`` sorted known
    categories, then NaN. Tables ``MAX_BINS`` wide take the unrolled search, wider ones (exact
    binning) the loop.
    """
    if categories.shape[1] != MAX_BINS or edges.shape[1] < MAX_BINS:
        raise ValueError(
            "bin_codes: category tables must be 255 wide (MAX_BINS), edge tables at least."
        )
    narrow = edges.shape[1] == MAX_BINS
    for r in range(X.shape[0]):
        for f in range(X.shape[1]):
            x = X[r, f]
            if np.isnan(x):
                codes[r, f] = missing
            elif is_categorical[f]:
                index = _count_below_narrow(categories, f, x)
                seen = index < n_categories[f] and categories[f, index] == x
                codes[r, f] = index if seen else missing
            elif narrow:
                codes[r, f] = _count_below_narrow(edges, f, x)
            else:
                codes[r, f] = _count_below(edges, f, n_edges[f], x)


def bin_codes_numpy(
    X: NDArray[np.float64],
    edges: NDArray[np.float64],
    n_edges: NDArray[np.intp],
    categories: NDArray[np.float64],
    n_categories: NDArray[np.intp],
    is_categorical: NDArray[np.bool_],
    missing: int,
    codes: NDArray[Any],
) -> None:
    """The kernel's twin: one ``searchsorted`` per feature."""
    for f in range(X.shape[1]):
        column = X[:, f]
        if is_categorical[f]:
            known = categories[f, : n_categories[f]]
            if known.size == 0:
                codes[:, f] = missing
                continue
            index = np.clip(np.searchsorted(known, column), 0, known.size - 1)
            seen = known[index] == column  # False for NaN
            codes[:, f] = np.where(seen, index, missing)
        else:
            found = np.searchsorted(edges[f, : n_edges[f]], column, side="left")
            found[np.isnan(column)] = missing
            codes[:, f] = found


# Fill ``codes`` (n_samples, n_features) from ``X``; see bin_codes_compiled.
bin_codes = select(bin_codes_compiled, bin_codes_numpy)


@kernel
def present_values_compiled(
    X: NDArray[np.float64], first: int, stop: int
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """Row ``f − first`` of the first array holds feature ``f``'s non-NaN values in row order
    (its first ``counts[f − first]`` entries, the second array), for ``first <= f < stop``."""
    n_rows = X.shape[0]
    values = np.empty((stop - first, n_rows))
    counts = np.zeros(stop - first, np.intp)
    for r in range(n_rows):
        for f in range(first, stop):
            x = X[r, f]
            values[f - first, counts[f - first]] = x
            counts[f - first] += not np.isnan(x)  # a NaN is overwritten by the next value
    return values, counts


def present_values_numpy(
    X: NDArray[np.float64], first: int, stop: int
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """The kernel's twin: each column masked by ``~isnan``."""
    values = np.empty((stop - first, X.shape[0]))
    counts = np.zeros(stop - first, np.intp)
    for f in range(first, stop):
        column = X[:, f]
        present = column[~np.isnan(column)]
        values[f - first, : present.size] = present
        counts[f - first] = present.size
    return values, counts


# Features first..stop-1's non-missing values of X; see present_values_compiled.
present_values = select(present_values_compiled, present_values_numpy)
