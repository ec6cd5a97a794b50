"""The whole-tree kernel's steps shared out among threads, each to the serial step's bit.

LightGBM's serial tree learner parallelises inside a tree with OpenMP (Ke et al. 2017;
``SerialTreeLearner``): histograms feature group by feature group, the split search feature
by feature, the data partition and score update by blocks of rows. Here the same steps of
:func:`engine.tree.grow.whole_tree._grow_compiled` run on Numba's thread pool (``prange``),
cut so that every float is added in the serial kernel's order, which is what keeps the models
unchanged to the bit whatever the number of threads:

* histograms by blocks of features (each feature's histogram is one thread's, its rows added
  in row order: LightGBM's "col-wise" plan; a split of the rows would need the partial
  histograms summed, which changes the sums' last bits);
* the sibling subtraction by the same blocks of features, in the same wake of the pool;
* the split search by blocks of nodes (nodes are independent);
* the partition by blocks of rows for the moves (a stable counting sort: each block's rows
  land after the earlier blocks', so the children hold their rows in the serial order), then
  by blocks of children for their totals, each child's rows summed in that order.

They are inlined into the whole-tree kernel, which Numba compiles as one parallel function
(:func:`engine._kernels.parallel_kernel`), so each ``prange`` loop becomes a task of that
function's own machine code. Kept as separate parallel functions called from a serial cached
kernel they hit an open Numba defect (numba#8578, numba#4807): the cached caller may name
the callee's parallel code wrongly in another process, and here a kernel cache written by one
test run segfaulted in every process that loaded it. Called on their own (tests) they run
their blocks in turn, on one thread.

Each wake of Numba's pool costs two hand-offs to every thread and back (its workqueue layer;
measured ~85 us per parallel loop on this 2-core machine at load 9), so the whole-tree kernel
shares a step only when the step is large enough to repay it (:mod:`engine.tree.grow.whole_tree`).
Each takes ``n_parts`` (the thread count) and gives the same result for any value; with one
it calls the serial kernel and never wakes Numba's pool (a forest's worker processes grow on
one thread each). The caller sets Numba's thread count (:mod:`engine._threads`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import prange
from numpy.typing import NDArray

from engine._kernels import inline_kernel
from engine.tree._histograms import _histograms_compiled, _siblings_compiled
from engine.tree.grow.partition_kernels import _partition_compiled
from engine.tree.split.search_kernels import search_histograms, search_rows

__all__ = [
    "children_histograms_threads",
    "histograms_threads",
    "partition_threads",
    "search_histograms_threads",
    "search_rows_threads",
]


@inline_kernel
def histograms_threads(
    n_parts: int,
    columns: NDArray[Any],
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    features: NDArray[np.int64],
    channels: NDArray[np.float64],
    classes: NDArray[np.int64],
    histograms: NDArray[np.float64],
) -> None:
    """:func:`~engine.tree._histograms.build_histograms`' kernel, features in ``n_parts``
    blocks."""
    n_features = features.size
    if n_parts <= 1:  # no thread pool woken
        _histograms_compiled(
            columns, rows, slot_of_row, features, channels, classes, histograms, 0, n_features
        )
        return
    for part in prange(n_parts):
        _histograms_compiled(
            columns,
            rows,
            slot_of_row,
            features,
            channels,
            classes,
            histograms,
            part * n_features // n_parts,
            (part + 1) * n_features // n_parts,
        )


@inline_kernel
def children_histograms_threads(
    n_parts: int,
    columns: NDArray[Any],
    rows: NDArray[np.intp],
    pair_of_row: NDArray[np.intp],
    features: NDArray[np.int64],
    channels: NDArray[np.float64],
    classes: NDArray[np.int64],
    smaller: NDArray[np.float64],
    histograms: NDArray[np.float64],
    parents: NDArray[np.intp],
    smaller_side: NDArray[np.intp],
    children: NDArray[np.float64],
) -> None:
    """The smaller children's histograms from their rows, then every child's (the smaller's
    copied, its sibling's by subtraction from the parent's), features in ``n_parts`` blocks:
    one wake of the pool for both steps, since a block's subtraction needs only its own
    features' histograms."""
    n_features, n_pairs = features.size, parents.size
    if n_parts <= 1:
        _histograms_compiled(
            columns, rows, pair_of_row, features, channels, classes, smaller, 0, n_features
        )
        _siblings_compiled(histograms, parents, smaller, smaller_side, children)
        return
    n_cells = smaller.shape[2]
    width = smaller.shape[3]
    for part in prange(n_parts):
        first, last = part * n_features // n_parts, (part + 1) * n_features // n_parts
        _histograms_compiled(
            columns, rows, pair_of_row, features, channels, classes, smaller, first, last
        )
        # _siblings_compiled's assignments, restricted to this block's features.
        for pair in range(n_pairs):
            side = smaller_side[pair]
            parent = histograms[parents[pair]]
            built = children[2 * pair + side]
            derived = children[2 * pair + 1 - side]
            for j in range(first, last):
                for code in range(n_cells):
                    for c in range(width):
                        small = smaller[pair, j, code, c]
                        built[j, code, c] = small
                        derived[j, code, c] = parent[j, code, c] - small


@inline_kernel
def search_histograms_threads(
    n_parts: int,
    histograms: NDArray[np.float64],
    histogram_of_node: NDArray[np.intp],
    histogram_column: NDArray[np.intp],
    features: NDArray[np.int64],
    parents: NDArray[np.float64],
    parent_counts: NDArray[np.float64],
    settings: NDArray[np.float64],
    is_categorical: NDArray[np.bool_],
    monotone: NDArray[np.int8],
    bounds: NDArray[np.float64],
    missing_code: int,
    found: NDArray[np.bool_],
    gain: NDArray[np.float64],
    split_feature: NDArray[np.int64],
    split_bin: NDArray[np.int64],
    missing_left: NDArray[np.bool_],
    left_codes: NDArray[np.bool_],
) -> None:
    """:func:`~engine.tree.split.search_kernels.search_histograms`, nodes in ``n_parts``
    blocks (each node's search costs the same: its features' bins)."""
    n_nodes = histogram_of_node.size
    constrained = monotone.size > 0
    if n_parts <= 1:
        search_histograms(
            histograms,
            histogram_of_node,
            histogram_column,
            features,
            parents,
            parent_counts,
            settings,
            is_categorical,
            monotone,
            bounds,
            missing_code,
            found,
            gain,
            split_feature,
            split_bin,
            missing_left,
            left_codes,
        )
        return
    for part in prange(n_parts):
        first, last = part * n_nodes // n_parts, (part + 1) * n_nodes // n_parts
        if first == last:
            continue
        search_histograms(
            histograms,
            histogram_of_node[first:last],
            histogram_column,
            features[first:last],
            parents[first:last],
            parent_counts[first:last],
            settings,
            is_categorical,
            monotone,
            bounds[first:last] if constrained else bounds,
            missing_code,
            found[first:last],
            gain[first:last],
            split_feature[first:last],
            split_bin[first:last],
            missing_left[first:last],
            left_codes[first:last],
        )


@inline_kernel
def search_rows_threads(
    n_parts: int,
    columns: NDArray[Any],
    rows: NDArray[np.intp],
    node_start: NDArray[np.intp],
    features: NDArray[np.int64],
    channels: NDArray[np.float64],
    classes: NDArray[np.int64],
    class_weights: NDArray[np.float64],
    parents: NDArray[np.float64],
    parent_counts: NDArray[np.float64],
    settings: NDArray[np.float64],
    is_categorical: NDArray[np.bool_],
    monotone: NDArray[np.int8],
    bounds: NDArray[np.float64],
    missing_code: int,
    found: NDArray[np.bool_],
    gain: NDArray[np.float64],
    split_feature: NDArray[np.int64],
    split_bin: NDArray[np.int64],
    missing_left: NDArray[np.bool_],
    left_codes: NDArray[np.bool_],
) -> None:
    """:func:`~engine.tree.split.search_kernels.search_rows`, nodes in ``n_parts`` blocks of
    about as many rows each (a node's search costs its rows)."""
    if n_parts <= 1:
        search_rows(
            columns,
            rows,
            node_start,
            features,
            channels,
            classes,
            class_weights,
            parents,
            parent_counts,
            settings,
            is_categorical,
            monotone,
            bounds,
            missing_code,
            found,
            gain,
            split_feature,
            split_bin,
            missing_left,
            left_codes,
        )
        return
    constrained = monotone.size > 0
    cut = _node_blocks(node_start, n_parts)
    for part in prange(n_parts):
        first, last = cut[part], cut[part + 1]
        if first == last:
            continue
        search_rows(
            columns,
            rows,
            node_start[first : last + 1],
            features[first:last],
            channels,
            classes,
            class_weights,
            parents[first:last],
            parent_counts[first:last],
            settings,
            is_categorical,
            monotone,
            bounds[first:last] if constrained else bounds,
            missing_code,
            found[first:last],
            gain[first:last],
            split_feature[first:last],
            split_bin[first:last],
            missing_left[first:last],
            left_codes[first:last],
        )


@inline_kernel
def _node_blocks(node_start: NDArray[np.intp], n_parts: int) -> NDArray[np.intp]:
    # Node ranges [cut[p], cut[p + 1]) of about equal row counts, in node order.
    n_nodes = node_start.size - 1
    cut = np.empty(n_parts + 1, dtype=np.intp)
    cut[0], cut[n_parts] = 0, n_nodes
    base, n_rows = node_start[0], node_start[n_nodes] - node_start[0]
    node = 0
    for part in range(1, n_parts):
        target = base + n_rows * part // n_parts
        while node < n_nodes and node_start[node] < target:
            node += 1
        cut[part] = node
    return cut


@inline_kernel
def partition_threads(
    n_parts: int,
    columns: NDArray[Any],
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    split_of_slot: NDArray[np.intp],
    rank_of_slot: NDArray[np.intp],
    split_feature: NDArray[np.int64],
    left_codes: NDArray[np.bool_],
    n_children: int,
    channels: NDArray[np.float64],
    new_rows: NDArray[np.intp],
    new_slot: NDArray[np.intp],
    totals: NDArray[np.float64],
    counts: NDArray[np.int64],
) -> int:
    """:func:`~engine.tree.grow.partition_kernels.partition_rows`' kernel on ``n_parts``
    threads: the same rows in the same order, the same totals to the bit."""
    if n_parts <= 1:
        return _partition_compiled(
            columns,
            rows,
            slot_of_row,
            split_of_slot,
            rank_of_slot,
            split_feature,
            left_codes,
            n_children,
            channels,
            new_rows,
            new_slot,
            totals,
            counts,
        )
    n_rows = rows.size
    # Each block's rows per child, then where each block's rows of each child start.
    at = np.zeros((n_parts, n_children), dtype=np.intp)
    child_of_row = np.empty(n_rows, dtype=np.intp)
    for part in prange(n_parts):
        for i in range(part * n_rows // n_parts, (part + 1) * n_rows // n_parts):
            rank = rank_of_slot[slot_of_row[i]]
            if rank < 0:
                child_of_row[i] = -1
                continue
            split = split_of_slot[slot_of_row[i]]
            right = not left_codes[split, columns[split_feature[split], rows[i]]]
            child = 2 * rank + (1 if right else 0)
            child_of_row[i] = child
            at[part, child] += 1
    child_start = np.empty(n_children + 1, dtype=np.intp)
    position = 0
    for child in range(n_children):
        child_start[child] = position
        for part in range(n_parts):
            size = at[part, child]
            at[part, child] = position
            position += size
    child_start[n_children] = position
    for part in prange(n_parts):
        for i in range(part * n_rows // n_parts, (part + 1) * n_rows // n_parts):
            child = child_of_row[i]
            if child < 0:
                continue
            new_rows[at[part, child]] = rows[i]
            new_slot[at[part, child]] = child
            at[part, child] += 1
    # Each child's totals over its rows in their new order: partition_rows' adds.
    n_channels = channels.shape[1]
    cut = _node_blocks(child_start, n_parts)
    for part in prange(n_parts):
        for child in range(cut[part], cut[part + 1]):
            counts[child] = child_start[child + 1] - child_start[child]
            for c in range(n_channels):
                totals[child, c] = 0.0
            for p in range(child_start[child], child_start[child + 1]):
                row = new_rows[p]
                for c in range(n_channels):
                    totals[child, c] += channels[row, c]
    return position
