"""The per-level work of growing a tree, compiled, with the NumPy twin of each kernel.

A level of the grower (:mod:`engine.tree._grower`) sums each open node's rows into channel
totals, builds dense histograms for the nodes whose siblings come by subtraction, and moves
the rows of the nodes it splits to their children. The rows of a level are kept grouped by
node (children in order, each child's rows in their old order), so every kernel here reads
them front to back. Each kernel adds rows in the same order as its twin's ``bincount``, so the
two agree to the last bit; the twins are what ``COPPICE_ENGINE_KERNELS=numpy`` runs.
"""

from __future__ import annotations

import itertools
from concurrent.futures import Executor
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._kernels import kernel, select

__all__ = [
    "HISTOGRAM_CODES",
    "build_histograms",
    "node_totals",
    "partition_rows",
    "sibling_histograms",
    "squared_deviations",
]

# Codes per feature in a dense histogram (8-bit binning).
HISTOGRAM_CODES = 256
# Batches with fewer rows are histogrammed on the calling thread: handing out the features
# would cost more than it saves.
PARALLEL_MIN_ROWS = 2_000

_NO_CLASSES = np.zeros(0, dtype=np.int64)


# -- dense histograms ---------------------------------------------------------------------


@kernel
def _histograms_compiled(
    columns: NDArray[Any],
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    features: NDArray[np.int64],
    channels: NDArray[np.float64],
    classes: NDArray[np.int64],
    histograms: NDArray[np.float64],
    first: int,
    last: int,
) -> None:
    # Feature by feature over feature-major codes (LightGBM's "col-wise" histograms, Ke et al.
    # 2017): the feature's codes stream in row order and each node's histogram of it stays in
    # L1 cache, a bin's count and sums side by side in one cache line. Row-major reads, which
    # spread every row's adds over all the features' histograms, and separate count and sum
    # arrays ran three to four times slower; indexing the 4-D array per row instead of a
    # node's 2-D histogram, 1.6 times slower.
    histograms[:, first:last] = 0.0
    n_slots = histograms.shape[0]
    node_start = np.zeros(n_slots + 1, dtype=np.intp)
    for i in range(rows.size):
        node_start[slot_of_row[i] + 1] += 1
    for slot in range(n_slots):
        node_start[slot + 1] += node_start[slot]
    n_channels = channels.shape[1]
    by_class = classes.size > 0
    for j in range(first, last):
        codes = columns[features[j]]
        for slot in range(n_slots):
            histogram = histograms[slot, j]
            start, stop = node_start[slot], node_start[slot + 1]
            if by_class:
                for i in range(start, stop):
                    row = rows[i]
                    code = codes[row]
                    histogram[code, 0] += 1.0
                    histogram[code, 1 + classes[row]] += channels[row, 0]
            elif n_channels == 2:
                for i in range(start, stop):
                    row = rows[i]
                    code = codes[row]
                    histogram[code, 0] += 1.0
                    histogram[code, 1] += channels[row, 0]
                    histogram[code, 2] += channels[row, 1]
            else:
                for i in range(start, stop):
                    row = rows[i]
                    code = codes[row]
                    histogram[code, 0] += 1.0
                    for c in range(n_channels):
                        histogram[code, 1 + c] += channels[row, c]


def _histograms_numpy(
    columns: NDArray[Any],
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    features: NDArray[np.int64],
    channels: NDArray[np.float64],
    classes: NDArray[np.int64],
    histograms: NDArray[np.float64],
    first: int,
    last: int,
) -> None:
    # One feature at a time: small ``bincount`` calls beat one huge call whose keys and
    # repeated weights would first have to be materialised.
    n_slots, _, n_codes, width = histograms.shape
    n_channels = width - 1
    base = slot_of_row * n_codes
    n_cells = n_slots * n_codes
    by_class = classes.size > 0
    if by_class:
        class_offset = base * n_channels + classes[rows]
        row_weights = channels[rows, 0]
    else:
        row_channels = channels[rows]
    for j in range(first, last):
        codes = columns[features[j]][rows]
        keys = base + codes
        counts = np.bincount(keys, minlength=n_cells).reshape(n_slots, n_codes)
        histograms[:, j, :, 0] = counts
        if by_class:
            class_keys = class_offset + codes.astype(np.intp) * n_channels
            histograms[:, j, :, 1:] = np.bincount(
                class_keys, weights=row_weights, minlength=n_cells * n_channels
            ).reshape(n_slots, n_codes, n_channels)
            continue
        for c in range(n_channels):
            histograms[:, j, :, 1 + c] = np.bincount(
                keys, weights=row_channels[:, c], minlength=n_cells
            ).reshape(n_slots, n_codes)


_histograms = select(_histograms_compiled, _histograms_numpy)


def build_histograms(
    columns: NDArray[Any],
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    n_slots: int,
    features: NDArray[np.int64],
    channels: NDArray[np.float64],
    n_channels: int,
    classes: NDArray[np.int64] | None = None,
    threads: Executor | None = None,
) -> NDArray[np.float64]:
    """Dense histograms of a batch of nodes, shape (S, F, 256, 1 + C).

    Cell ``[s, j, code]`` holds the number of the node's rows in that bin, then their channel
    sums (a count is exact in float64 up to 2⁵³ rows).

    Parameters
    ----------
    columns : ndarray of uint8, shape (n_features, n_rows)
        Bin codes, feature-major (``binned.T``, contiguous).
    rows, slot_of_row : ndarray of intp
        The batch's rows and the node slot ``0..S-1`` of each.
    features : ndarray of int64, shape (F,)
        The features to histogram.
    channels : ndarray of float64, shape (n_rows, n_channels) or (n_rows, 1)
        Per-row channels; with ``classes``, a single column of row weights that each row adds
        to its class's channel (one add per row instead of one per class).
    threads : Executor, optional
        Shares the features out among the pool's threads (the kernel releases the GIL);
        each fills its own features' histograms, so the result is the same for any number.
    """
    if slot_of_row.size > 1 and bool((slot_of_row[1:] < slot_of_row[:-1]).any()):
        order = np.argsort(slot_of_row, kind="stable")  # the kernel reads each node's rows
        rows, slot_of_row = rows[order], slot_of_row[order]  # as one run
    histograms = np.empty((n_slots, features.size, HISTOGRAM_CODES, 1 + n_channels))
    args = (
        columns,
        rows.astype(np.intp, copy=False),
        slot_of_row.astype(np.intp, copy=False),
        np.ascontiguousarray(features, dtype=np.int64),
        channels,
        _NO_CLASSES if classes is None else classes,
        histograms,
    )
    n_parts = min(features.size, getattr(threads, "_max_workers", 1))
    if threads is None or n_parts <= 1 or rows.size < PARALLEL_MIN_ROWS:
        _histograms(*args, 0, features.size)
        return histograms
    bounds = np.linspace(0, features.size, n_parts + 1).astype(int)
    parts = [
        threads.submit(_histograms, *args, int(first), int(last))
        for first, last in itertools.pairwise(bounds)
    ]
    for part in parts:
        part.result()
    return histograms


# -- sibling subtraction ---------------------------------------------------------------------


@kernel
def _siblings_compiled(
    histograms: NDArray[np.float64],
    parents: NDArray[np.intp],
    smaller: NDArray[np.float64],
    smaller_side: NDArray[np.intp],
    children: NDArray[np.float64],
) -> None:
    for pair in range(parents.size):
        side = smaller_side[pair]
        parent = histograms[parents[pair]].ravel()
        small = smaller[pair].ravel()
        built = children[2 * pair + side].ravel()
        derived = children[2 * pair + 1 - side].ravel()
        for cell in range(small.size):
            built[cell] = small[cell]
            derived[cell] = parent[cell] - small[cell]


def _siblings_numpy(
    histograms: NDArray[np.float64],
    parents: NDArray[np.intp],
    smaller: NDArray[np.float64],
    smaller_side: NDArray[np.intp],
    children: NDArray[np.float64],
) -> None:
    pairs = np.arange(parents.size)
    by_pair = children.reshape(parents.size, 2, *smaller.shape[1:])
    by_pair[pairs, smaller_side] = smaller
    by_pair[pairs, 1 - smaller_side] = histograms[parents] - smaller


_siblings = select(_siblings_compiled, _siblings_numpy)


def sibling_histograms(
    histograms: NDArray[np.float64],
    parents: NDArray[np.intp],
    smaller: NDArray[np.float64],
    smaller_side: NDArray[np.intp],
) -> NDArray[np.float64]:
    """Children's histograms (2P, F, 256, 1 + C), the left child of pair p at row 2p.

    ``smaller`` holds the histograms built from the rows of each pair's smaller child (on
    side ``smaller_side``: 0 left, 1 right); its sibling's are the parent's minus them
    (LightGBM's histogram subtraction, Ke et al. 2017), in one pass without temporaries.
    """
    children = np.empty((2 * parents.size, *smaller.shape[1:]))
    _siblings(
        np.ascontiguousarray(histograms),
        parents.astype(np.intp, copy=False),
        np.ascontiguousarray(smaller),
        smaller_side.astype(np.intp, copy=False),
        children,
    )
    return children


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


# -- moving rows to their children ------------------------------------------------------


@kernel
def _partition_compiled(
    columns: NDArray[Any],
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    split_of_slot: NDArray[np.intp],
    rank_of_slot: NDArray[np.intp],
    split_feature: NDArray[np.int64],
    left_codes: NDArray[np.bool_],
    n_children: int,
    new_rows: NDArray[np.intp],
    new_slot: NDArray[np.intp],
) -> int:
    child_size = np.zeros(n_children + 1, dtype=np.intp)
    goes_right = np.empty(rows.size, dtype=np.bool_)
    for i in range(rows.size):
        rank = rank_of_slot[slot_of_row[i]]
        if rank < 0:
            continue
        split = split_of_slot[slot_of_row[i]]
        right = not left_codes[split, columns[split_feature[split], rows[i]]]
        goes_right[i] = right
        child_size[2 * rank + right + 1] += 1
    for child in range(n_children):
        child_size[child + 1] += child_size[child]
    for i in range(rows.size):
        rank = rank_of_slot[slot_of_row[i]]
        if rank < 0:
            continue
        child = 2 * rank + goes_right[i]
        position = child_size[child]
        new_rows[position] = rows[i]
        new_slot[position] = child
        child_size[child] += 1
    return child_size[n_children]


def _partition_numpy(
    columns: NDArray[Any],
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    split_of_slot: NDArray[np.intp],
    rank_of_slot: NDArray[np.intp],
    split_feature: NDArray[np.int64],
    left_codes: NDArray[np.bool_],
    n_children: int,
    new_rows: NDArray[np.intp],
    new_slot: NDArray[np.intp],
) -> int:
    rank = rank_of_slot[slot_of_row]
    moving = rank >= 0
    rows, split = rows[moving], split_of_slot[slot_of_row[moving]]
    right = ~left_codes[split, columns[split_feature[split], rows]]
    child = 2 * rank[moving] + right
    # A stable sort keeps each child's rows in their old order, as the kernel does.
    order = np.argsort(child, kind="stable")
    new_rows[: rows.size] = rows[order]
    new_slot[: rows.size] = child[order]
    return int(rows.size)


_partition = select(_partition_compiled, _partition_numpy)


def partition_rows(
    columns: NDArray[Any],
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    split_of_slot: NDArray[np.intp],
    rank_of_slot: NDArray[np.intp],
    split_feature: NDArray[np.int64],
    left_codes: NDArray[np.bool_],
    n_splits: int,
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Rows of the split nodes, moved to their children and grouped by child.

    Parameters
    ----------
    columns : ndarray of uint8 or uint16, shape (n_features, n_rows)
        Bin codes, feature-major: a node's rows, ascending, read one column forwards (row-
        major codes made every row a cache miss on deep trees).
    rows, slot_of_row : ndarray of intp
        A level's rows, grouped by node slot.
    split_of_slot : ndarray of intp, shape (S,)
        Row of ``split_feature`` / ``left_codes`` holding each slot's split (any value for
        slots not split).
    rank_of_slot : ndarray of intp, shape (S,)
        ``k`` for the k-th split slot (in slot order), −1 for slots not split: their rows
        leave the level.
    n_splits : int
        Number of split slots; the children are numbered ``2k`` (left) and ``2k + 1``.

    Returns
    -------
    rows, slot_of_row : the children's rows, grouped by child ``0..2·n_splits − 1``.
    """
    new_rows = np.empty(rows.size, dtype=np.intp)
    new_slot = np.empty(rows.size, dtype=np.intp)
    n_moved = _partition(
        columns,
        rows.astype(np.intp, copy=False),
        slot_of_row.astype(np.intp, copy=False),
        split_of_slot.astype(np.intp, copy=False),
        rank_of_slot.astype(np.intp, copy=False),
        np.ascontiguousarray(split_feature, dtype=np.int64),
        np.ascontiguousarray(left_codes),
        2 * n_splits,
        new_rows,
        new_slot,
    )
    return new_rows[:n_moved], new_slot[:n_moved]
