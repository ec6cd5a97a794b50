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
* the partition by blocks of nodes (a node's children take its rows only, and where they
  land is known beforehand), each node's rows moved and its children's totals summed by
  the serial loop.

They are inlined into the whole-tree kernel, which Numba compiles as one parallel function
(:func:`engine._kernels.parallel_kernel`), so each ``prange`` loop becomes a task of that
function's own machine code. Kept as separate parallel functions called from a serial cached
kernel they hit an open Numba defect (numba#8578, numba#4807): the cached caller may name
the callee's parallel code wrongly in another process, and here a kernel cache written by one
test run segfaulted in every process that loaded it. Called on their own (tests) they run
their blocks in turn, on one thread.

Each wake of Numba's pool costs: with its workqueue layer two hand-offs to every thread and
back (~85 us per parallel loop on this 2-core machine at load 9); with oneTBB's (the engine's
first choice, :mod:`engine._kernels`) less, as the calling thread takes a share and the
pool's threads spin briefly before sleeping. Either way the whole-tree kernel
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
from engine.tree.grow.partition_kernels import partition_runs, partition_slots
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
    node_start: NDArray[np.intp],
    split_of_slot: NDArray[np.intp],
    rank_of_slot: NDArray[np.intp],
    split_feature: NDArray[np.int64],
    left_codes: NDArray[np.bool_],
    channels: NDArray[np.float64],
    new_rows: NDArray[np.intp],
    new_slot: NDArray[np.intp],
    totals: NDArray[np.float64],
    counts: NDArray[np.int64],
    right_rows: NDArray[np.intp],
) -> int:
    """:func:`~engine.tree.grow.partition_kernels.partition_runs` with its nodes in
    ``n_parts`` blocks of about as many moving rows each, one wake of the pool: the same
    rows in the same order, the same totals to the bit.

    A split node's children take its rows only, so where they land is known before any
    moves (the moving rows of the slots before it), and each block runs the serial kernel's
    loop (:func:`~engine.tree.grow.partition_kernels.partition_slots`) on its own slots,
    its scratch the part of ``right_rows`` under its own runs. A level of one split node
    (every tree's root) stays on the calling thread.
    """
    n_slots = node_start.size - 1
    # Where each slot's children start: the rows of the split slots before it.
    out_start = np.empty(n_slots + 1, dtype=np.intp)
    out_start[0] = 0
    n_split = 0
    for slot in range(n_slots):
        moving = node_start[slot + 1] - node_start[slot] if rank_of_slot[slot] >= 0 else 0
        out_start[slot + 1] = out_start[slot] + moving
        n_split += 1 if rank_of_slot[slot] >= 0 else 0
    if n_parts <= 1 or n_split < 2:
        return partition_runs(
            columns,
            rows,
            node_start,
            split_of_slot,
            rank_of_slot,
            split_feature,
            left_codes,
            channels,
            new_rows,
            new_slot,
            totals,
            counts,
            right_rows,
        )
    cut = _node_blocks(out_start, n_parts)
    for part in prange(n_parts):
        first, last = cut[part], cut[part + 1]
        if first == last:
            continue
        partition_slots(
            columns,
            rows,
            node_start,
            first,
            last,
            out_start[first],
            split_of_slot,
            rank_of_slot,
            split_feature,
            left_codes,
            channels,
            new_rows,
            new_slot,
            totals,
            counts,
            right_rows[node_start[first] :],
        )
    return out_start[n_slots]
