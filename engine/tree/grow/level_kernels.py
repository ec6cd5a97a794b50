"""The per-level work of growing a tree, compiled, with the NumPy twin of each kernel.

A level of the grower (:mod:`engine.tree.grow.grower`) sums each open node's rows into channel
totals and moves the rows of the nodes it splits to their children
(:mod:`engine.tree.grow.partition_kernels`); the dense histograms of the nodes whose siblings come
by subtraction are built in :mod:`engine.tree._histograms`. The rows of a level are kept
grouped by node (children in order, each child's rows in their old order), so every kernel here
reads them front to back. Each kernel adds rows in the same order as its twin's ``bincount``,
so the two agree to the last bit; the twins are what ``COPPICE_ENGINE_KERNELS=numpy`` runs.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from engine._kernels import kernel, select

__all__ = [
    "node_totals",
    "shuffle_rows",
    "squared_deviations",
]


# -- node totals ----------------------------------------------------------------------------


@kernel
def _totals_compiled(
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    channels: NDArray[np.float64],
    totals: NDArray[np.float64],
    counts: NDArray[np.int64],
) -> None:
    totals[:] = 0.0
    counts[:] = 0
    for i in range(rows.size):
        slot = slot_of_row[i]
        counts[slot] += 1
        for c in range(channels.shape[1]):
            totals[slot, c] += channels[rows[i], c]


def _totals_numpy(
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    channels: NDArray[np.float64],
    totals: NDArray[np.float64],
    counts: NDArray[np.int64],
) -> None:
    n_slots = totals.shape[0]
    row_channels = channels[rows]
    for c in range(channels.shape[1]):
        totals[:, c] = np.bincount(slot_of_row, weights=row_channels[:, c], minlength=n_slots)
    counts[:] = np.bincount(slot_of_row, minlength=n_slots)


_totals = select(_totals_compiled, _totals_numpy)


def node_totals(
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    n_slots: int,
    channels: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Channel totals (S, C) and row counts (S,) of a batch of nodes."""
    totals = np.empty((n_slots, channels.shape[1]))
    counts = np.empty(n_slots, dtype=np.int64)
    _totals(
        rows.astype(np.intp, copy=False),
        slot_of_row.astype(np.intp, copy=False),
        channels,
        totals,
        counts,
    )
    return totals, counts


@kernel
def _deviations_compiled(
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    targets: NDArray[np.float64],
    weights: NDArray[np.float64],
    mean: NDArray[np.float64],
    squared: NDArray[np.float64],
) -> None:
    squared[:] = 0.0
    for i in range(rows.size):
        slot = slot_of_row[i]
        deviation = targets[rows[i]] - mean[slot]
        squared[slot] += weights[rows[i]] * (deviation * deviation)


def _deviations_numpy(
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    targets: NDArray[np.float64],
    weights: NDArray[np.float64],
    mean: NDArray[np.float64],
    squared: NDArray[np.float64],
) -> None:
    deviation = targets[rows] - mean[slot_of_row]
    squared[:] = np.bincount(
        slot_of_row, weights=weights[rows] * deviation**2, minlength=squared.size
    )


_deviations = select(_deviations_compiled, _deviations_numpy)


def squared_deviations(
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    targets: NDArray[np.float64],
    weights: NDArray[np.float64],
    mean: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Weighted squared deviations from each node's mean, Σ w (y − ȳ)², per node (two-pass,
    so the variance does not cancel catastrophically as Σwy² − (Σwy)²/W can)."""
    squared = np.empty(mean.size)
    _deviations(
        rows.astype(np.intp, copy=False),
        slot_of_row.astype(np.intp, copy=False),
        targets,
        weights,
        mean,
        squared,
    )
    return squared


# -- drawing candidate features ---------------------------------------------------------


@kernel
def _shuffle_compiled(
    order: NDArray[np.intp], rows: NDArray[np.intp], uniforms: NDArray[np.float64], start: int
) -> None:
    n_columns = order.shape[1]
    for k in range(rows.size):
        row = rows[k]
        for step in range(uniforms.shape[1]):
            at = start + step
            pick = min(at + int(uniforms[k, step] * (n_columns - at)), n_columns - 1)
            order[row, at], order[row, pick] = order[row, pick], order[row, at]


def _shuffle_numpy(
    order: NDArray[np.intp], rows: NDArray[np.intp], uniforms: NDArray[np.float64], start: int
) -> None:
    n_columns = order.shape[1]
    for step in range(uniforms.shape[1]):
        at = start + step
        pick = np.minimum(
            at + (uniforms[:, step] * (n_columns - at)).astype(np.intp), n_columns - 1
        )
        taken = order[rows, pick]
        order[rows, pick] = order[rows, at]
        order[rows, at] = taken


_shuffle = select(_shuffle_compiled, _shuffle_numpy)


def shuffle_rows(
    order: NDArray[np.intp], rows: NDArray[np.intp], uniforms: NDArray[np.float64], start: int
) -> None:
    """Fisher–Yates steps ``start, start + 1, …`` on the given rows of ``order``, in place.

    Step ``at`` swaps ``order[row, at]`` with a uniformly drawn entry of ``order[row, at:]``
    (``uniforms[k, at − start]`` for ``rows[k]``), so after it ``order[row, :at + 1]`` is a
    uniform draw without replacement, and later steps continue the same draw. A node takes
    its candidate features this way one round at a time, as scikit-learn's splitter draws
    them one at a time (Louppe 2014, §5.3), with one uniform per feature taken rather than
    one per feature of the pool.

    Parameters
    ----------
    order : ndarray of intp, shape (n, m)
    rows : ndarray of intp, shape (k,)
    uniforms : ndarray of float64, shape (k, steps), steps ≤ m − start
    """
    if rows.size and uniforms.shape[1]:
        _shuffle(order, rows.astype(np.intp, copy=False), uniforms, start)
