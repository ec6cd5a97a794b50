"""Dense node histograms, and a sibling's by subtraction: the compiled kernels, their NumPy
twins, and naive references.

A node's histogram of a feature holds, per bin code, the number of the node's rows in that
bin and their channel sums (gradient and hessian, or class weights, or weight and weighted
target): the statistics every split "bin ≤ b" of the feature is scored from. Building them
by streaming each feature's codes once is the histogram algorithm of LightGBM (Ke et al.
2017) and of XGBoost's ``hist`` method (Chen and Guestrin 2016, §3.3); only the smaller
child of a split is built from its rows, its sibling being the parent's histogram less it
(Ke et al. 2017, "histogram subtraction").

Three implementations of each, as scikit-learn's ``histogram.pyx`` keeps
``_build_histogram_naive`` beside its optimised builders:

* the compiled kernel (``_histograms_compiled``, ``_siblings_compiled``), which the engine
  runs;
* its NumPy twin (``_histograms_numpy``, ``_siblings_numpy``), which
  ``COPPICE_ENGINE_KERNELS=numpy`` selects;
* a naive reference (:func:`naive_histograms`, :func:`naive_sibling_histograms`): one
  Python loop over the rows, obviously right and far too slow to run, which the tests hold
  the other two equal to.

All three add each cell's rows in the same order (a node's rows as given, one after another),
so they agree to the last bit, fractional channels included; subtraction is one float
operation per cell in each.
"""

from __future__ import annotations

import itertools
from concurrent.futures import Executor
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._kernels import kernel, select
from engine.tree._common import HISTOGRAM_CODES, HISTOGRAM_DTYPE, NARROW_CODE_DTYPE

__all__ = [
    "build_histograms",
    "naive_histograms",
    "naive_sibling_histograms",
    "sibling_histograms",
    "smaller_children",
]

# Batches with fewer rows are histogrammed on the calling thread: handing out the features
# would cost more than it saves.
PARALLEL_MIN_ROWS = 2_000

_NO_CLASSES = np.zeros(0, dtype=np.int64)


# -- building ---------------------------------------------------------------------------------


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
    # A root holding every row in order (a stump's only histogram, every boosted tree's
    # first) reads codes and channels straight instead of through ``rows``: the same adds in
    # the same order, a third less time (LLVM lifts the test out of the loops).
    in_order = rows.size == columns.shape[1]
    for i in range(rows.size if in_order else 0):
        if rows[i] != i:
            in_order = False
            break
    # The rows' channels gathered once into row order, so that every feature's pass reads
    # them front to back (LightGBM's "ordered gradients", ``ConstructHistogramsInner``)
    # instead of gathering them anew per feature: the same values added in the same order.
    if in_order or by_class or n_channels != 2:
        ordered = channels
    else:
        ordered = np.empty((rows.size, 2))
        for i in range(rows.size):
            row = rows[i]
            ordered[i, 0] = channels[row, 0]
            ordered[i, 1] = channels[row, 1]
    pairs = not by_class and n_channels == 2
    # Four features per pass over a node's rows when the rows carry (g, h): each row's index
    # and channels are read once for the four, and four histograms (24 KiB) still fit in L1.
    # Every cell still gets its rows in row order. 20% faster than one feature per pass.
    j = first
    while pairs and j + 4 <= last:
        codes0, codes1 = columns[features[j]], columns[features[j + 1]]
        codes2, codes3 = columns[features[j + 2]], columns[features[j + 3]]
        for slot in range(n_slots):
            h0, h1 = histograms[slot, j], histograms[slot, j + 1]
            h2, h3 = histograms[slot, j + 2], histograms[slot, j + 3]
            for i in range(node_start[slot], node_start[slot + 1]):
                row = i if in_order else rows[i]
                g, h = ordered[i, 0], ordered[i, 1]
                code = codes0[row]
                h0[code, 0] += 1.0
                h0[code, 1] += g
                h0[code, 2] += h
                code = codes1[row]
                h1[code, 0] += 1.0
                h1[code, 1] += g
                h1[code, 2] += h
                code = codes2[row]
                h2[code, 0] += 1.0
                h2[code, 1] += g
                h2[code, 2] += h
                code = codes3[row]
                h3[code, 0] += 1.0
                h3[code, 1] += g
                h3[code, 2] += h
        j += 4
    for k in range(j, last):
        codes = columns[features[k]]
        for slot in range(n_slots):
            histogram = histograms[slot, k]
            start, stop = node_start[slot], node_start[slot + 1]
            if by_class:
                for i in range(start, stop):
                    row = i if in_order else rows[i]
                    code = codes[row]
                    histogram[code, 0] += 1.0
                    histogram[code, 1 + classes[row]] += channels[row, 0]
            elif n_channels == 2:
                for i in range(start, stop):
                    code = codes[i if in_order else rows[i]]
                    histogram[code, 0] += 1.0
                    histogram[code, 1] += ordered[i, 0]
                    histogram[code, 2] += ordered[i, 1]
            else:
                for i in range(start, stop):
                    row = i if in_order else rows[i]
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
    """Dense histograms of a batch of nodes, shape (S, F, 256, 1 + C), float64.

    Cell ``[s, j, code]`` holds the number of the node's rows in that bin, then their channel
    sums (a count is exact in float64 up to 2⁵³ rows).

    Parameters
    ----------
    columns : ndarray of uint8, shape (n_features, n_rows)
        Bin codes, feature-major (``binned.T``, contiguous); narrow codes only (a dense
        histogram has a cell per narrow code, see :mod:`engine.tree._common`).
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
    if columns.dtype != NARROW_CODE_DTYPE:
        # The kernel writes cell ``code`` unchecked: a wide code would land past the histogram.
        raise ValueError(f"Dense histograms take uint8 codes; got {columns.dtype}.")
    if slot_of_row.size > 1 and bool((slot_of_row[1:] < slot_of_row[:-1]).any()):
        order = np.argsort(slot_of_row, kind="stable")  # the kernel reads each node's rows
        rows, slot_of_row = rows[order], slot_of_row[order]  # as one run
    histograms = np.empty(
        (n_slots, features.size, HISTOGRAM_CODES, 1 + n_channels), dtype=HISTOGRAM_DTYPE
    )
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


def naive_histograms(
    columns: NDArray[Any],
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    n_slots: int,
    features: NDArray[np.int64],
    channels: NDArray[np.float64],
    n_channels: int,
    classes: NDArray[np.int64] | None = None,
) -> NDArray[np.float64]:
    """:func:`build_histograms` as a plain loop over the rows: the reference for tests.

    Each row adds one to its bin's count and its channels to its bin's sums, in every
    feature's histogram of its node; in the order the rows are given, which is the order the
    kernel and the twin add them too.
    """
    histograms = np.zeros(
        (n_slots, len(features), HISTOGRAM_CODES, 1 + n_channels), dtype=HISTOGRAM_DTYPE
    )
    for row, slot in zip(rows.tolist(), slot_of_row.tolist(), strict=True):
        for j, feature in enumerate(features.tolist()):
            cell = histograms[slot, j, int(columns[feature, row])]
            cell[0] += 1.0
            if classes is not None:
                cell[1 + classes[row]] += channels[row, 0]
            else:
                for c in range(n_channels):
                    cell[1 + c] += channels[row, c]
    return histograms


# -- siblings by subtraction ------------------------------------------------------------------


@kernel
def _smaller_children_compiled(
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    n_pairs: int,
    smaller_side: NDArray[np.intp],
    small_rows: NDArray[np.intp],
    small_pairs: NDArray[np.intp],
) -> int:
    counts = np.zeros(2 * n_pairs, dtype=np.intp)
    for i in range(slot_of_row.size):
        counts[slot_of_row[i]] += 1
    for pair in range(n_pairs):
        smaller_side[pair] = 1 if counts[2 * pair + 1] < counts[2 * pair] else 0
    n_small = 0
    for i in range(rows.size):
        slot = slot_of_row[i]
        if slot % 2 == smaller_side[slot // 2]:
            small_rows[n_small] = rows[i]
            small_pairs[n_small] = slot // 2
            n_small += 1
    return n_small


def _smaller_children_numpy(
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    n_pairs: int,
    smaller_side: NDArray[np.intp],
    small_rows: NDArray[np.intp],
    small_pairs: NDArray[np.intp],
) -> int:
    counts = np.bincount(slot_of_row, minlength=2 * n_pairs).reshape(n_pairs, 2)
    smaller_side[:] = counts[:, 1] < counts[:, 0]
    is_smaller = (slot_of_row % 2) == smaller_side[slot_of_row // 2]
    n_small = int(np.count_nonzero(is_smaller))
    small_rows[:n_small] = rows[is_smaller]
    small_pairs[:n_small] = slot_of_row[is_smaller] // 2
    return n_small


_smaller_children = select(_smaller_children_compiled, _smaller_children_numpy)


def smaller_children(
    rows: NDArray[np.intp], slot_of_row: NDArray[np.intp], n_pairs: int
) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]]:
    """The rows of each pair's smaller child, the histograms to build from rows.

    Children ``2p`` (left) and ``2p + 1`` (right) of split ``p``; the smaller is the one with
    fewer rows, the left on a tie. Returns each pair's smaller side (0 left, 1 right), then
    the smaller children's rows in their order in ``rows`` and the pair of each: one pass in
    the kernel where the NumPy expressions took five over the level's rows.
    """
    smaller_side = np.empty(n_pairs, dtype=np.intp)
    small_rows = np.empty(rows.size, dtype=np.intp)
    small_pairs = np.empty(rows.size, dtype=np.intp)
    n_small = _smaller_children(
        rows.astype(np.intp, copy=False),
        slot_of_row.astype(np.intp, copy=False),
        n_pairs,
        smaller_side,
        small_rows,
        small_pairs,
    )
    return smaller_side, small_rows[:n_small], small_pairs[:n_small]


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
    children = np.empty((2 * parents.size, *smaller.shape[1:]), dtype=HISTOGRAM_DTYPE)
    _siblings(
        np.ascontiguousarray(histograms),
        parents.astype(np.intp, copy=False),
        np.ascontiguousarray(smaller),
        smaller_side.astype(np.intp, copy=False),
        children,
    )
    return children


def naive_sibling_histograms(
    histograms: NDArray[np.float64],
    parents: NDArray[np.intp],
    smaller: NDArray[np.float64],
    smaller_side: NDArray[np.intp],
) -> NDArray[np.float64]:
    """:func:`sibling_histograms` pair by pair: the reference for tests."""
    children = np.empty((2 * len(parents), *smaller.shape[1:]), dtype=HISTOGRAM_DTYPE)
    for pair, (parent, side) in enumerate(
        zip(parents.tolist(), smaller_side.tolist(), strict=True)
    ):
        children[2 * pair + side] = smaller[pair]
        children[2 * pair + 1 - side] = histograms[parent] - smaller[pair]
    return children
