"""Leaf values summed over trees: every forest's and boosted model's ``predict``.

Rows descend as in :mod:`engine.tree.predict.traversal` (the same routing, the same flat layout of
:mod:`engine.tree.predict.node_arrays`, tree-major over blocks of rows), but summing leaf values over a
batch goes further, tree by tree over a block of rows:

- a tree the block will mostly visit is first read from start to end, node records and values,
  so that it arrives at streaming speed, not one dependent cache miss at a time: the descent
  then finds it in cache (1.5-2× on the benchmark forest, whose 100 trees of ~12,000 nodes are
  ~38 MB with their values);
- deep trees keep a fixed number of rows in flight, each replaced by the block's next row as it
  reaches its leaf, so no slot idles while the deepest row of a step finishes; shallow trees
  take steps of rows in lockstep for exactly their depth, without asking after each node
  whether it is a leaf;
- a row's leaf value is added to its sum as it reaches the leaf, in tree order from 0.0, so no
  (trees × rows) block of leaf indices is stored and read back, and the result is the same to
  the last bit whatever the block and batch sizes.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from engine._kernels import inline_kernel, kernel, select
from engine.tree._common import N_CATEGORY_CODES
from engine.tree.predict.node_arrays import HOT_NODE_DTYPE, NodeArrays, _kernel_rows
from engine.tree.predict.traversal import (
    FIXED_PASS_MAX_DEPTH,
    PAIRS_IN_STEP,
    _goes_right,
    _leaf_indices_kernel,
    _leaf_indices_numpy,
)

__all__ = ["finite_leaf_value_means", "leaf_value_sums"]

# Leaf-value sums: rows taken through every tree before the next rows start, twice as many as
# a tree has nodes, within bounds. Each block reads every tree it visits once more; larger
# blocks read the forest fewer times but their rows fall out of the caches between trees.
# On the benchmark forest (~12,000 nodes a tree), of 20,000 rows × 40 features, 8192-row blocks
# are ~10% slower than one block and 1024-row blocks ~60%; on 100 depth-6 trees 1024-row
# blocks are ~25% faster than one.
MIN_ROWS_PER_SUM_BLOCK = 1024
MAX_ROWS_PER_SUM_BLOCK = 32768
# Leaf-value sums: a tree is read whole before the descent when it has at most this many nodes
# per node visit the block's rows will make (a row passes ``depth`` nodes): below that, only
# the nodes the rows visit are worth loading (on the benchmark forest, 31 levels, reading each
# tree costs ~30% more than it saves for 128 rows and saves ~25% for 256).
READ_WHOLE_NODES_PER_VISIT = 2
# Leaf-value sums: batches of fewer rows, or too few to read the trees whole, take the
# leaf-index walk (which for a few rows spreads a step over trees of each row) and then add
# the leaves' values: below ~200 rows on the benchmark forest and 64 on 100 depth-6 trees.
MIN_ROWS_FOR_TREE_BY_TREE = 64
# Leaf-value sums, deep trees: rows in flight at once in the refilled descent (on the benchmark
# forest 8 to 12 are ~4% faster than 16, 4 ~20% slower, 32 ~10% slower).
ROWS_IN_FLIGHT = 10
# Leaf-value sums: what one 64-byte cache line holds of node records and of values.
NODES_PER_CACHE_LINE = 64 // HOT_NODE_DTYPE.itemsize
VALUES_PER_CACHE_LINE = 64 // 8
# NumPy twin of the leaf-value sums: (row, tree) pairs walked at a time.
TWIN_PAIRS_PER_CHUNK = 500_000


# -- compiled kernels ------------------------------------------------------------------------


@kernel
def _rows_per_sum_block(n_nodes: int, n_trees: int) -> int:
    """Rows a leaf-value sum takes through every tree at a time (see ``MIN_ROWS_PER_SUM_BLOCK``)."""
    return min(MAX_ROWS_PER_SUM_BLOCK, max(MIN_ROWS_PER_SUM_BLOCK, 2 * n_nodes // max(1, n_trees)))


@inline_kernel
def _read_tree(
    nodes: NDArray[np.void], node_values: NDArray[np.float64], first: int, end: int
) -> int:
    """Read nodes ``first:end`` and their values in memory order, one load per cache line.

    Sequential reads stream (the hardware prefetcher fetches ahead) where the descent's reads,
    each waiting on the one before, pay a full miss apiece. Returns a number made of what was
    read, which the caller must use: a load whose value is unused is compiled away.
    """
    seen = 0
    for i in range(first, end, NODES_PER_CACHE_LINE):
        seen += nodes[np.uintp(i)].left
    n_outputs = node_values.shape[1]
    flat = node_values.ravel()
    for i in range(first * n_outputs, end * n_outputs, VALUES_PER_CACHE_LINE):
        seen += flat[np.uintp(i)] != 0.0
    return seen


@inline_kernel
def _sum_tree_lockstep(
    X: NDArray[np.float64],
    start: int,
    stop: int,
    root: int,
    depth: int,
    nodes: NDArray[np.void],
    missing_left: NDArray[np.bool_],
    category_split: NDArray[np.int32],
    category_bitsets: NDArray[np.uint8],
    node_values: NDArray[np.float64],
    sums: NDArray[np.float64],
    pair_node: NDArray[np.intp],
) -> None:
    """Add one shallow tree's leaf values to ``sums`` of rows ``start:stop``.

    Steps of ``PAIRS_IN_STEP`` rows make exactly ``depth`` passes: a row at its leaf stays
    there (leaves loop onto themselves), which costs less than asking after each node.
    """
    n_outputs = node_values.shape[1]
    for first_row in range(start, stop, PAIRS_IN_STEP):
        n_step = min(PAIRS_IN_STEP, stop - first_row)
        for j in range(n_step):
            pair_node[j] = root
        for _ in range(depth):
            for j in range(n_step):
                at = np.uintp(pair_node[j])
                hot = nodes[at]
                value = X[np.uintp(first_row + j), np.uintp(hot.feature)]
                pair_node[j] = hot.left + _goes_right(
                    value, at, hot.threshold, missing_left, category_split, category_bitsets
                )
        for j in range(n_step):
            leaf = np.uintp(pair_node[j])
            row = np.uintp(first_row + j)
            for k in range(n_outputs):
                sums[row, k] += node_values[leaf, k]


@inline_kernel
def _sum_tree_refilled(
    X: NDArray[np.float64],
    start: int,
    stop: int,
    root: int,
    depth: int,
    nodes: NDArray[np.void],
    missing_left: NDArray[np.bool_],
    category_split: NDArray[np.int32],
    category_bitsets: NDArray[np.uint8],
    node_values: NDArray[np.float64],
    sums: NDArray[np.float64],
    slot_node: NDArray[np.intp],
    slot_row: NDArray[np.intp],
) -> None:
    """Add one deep tree's leaf values to ``sums`` of rows ``start:stop``.

    ``ROWS_IN_FLIGHT`` rows descend side by side; a row that reaches its leaf adds its values
    and hands its slot to the block's next row, so every slot does useful work until the block
    runs out (a lockstep step waits for its deepest row: on fully grown trees the deepest of
    16 leaves is ~1.5× the typical depth).
    """
    n_outputs = node_values.shape[1]
    n_live = min(ROWS_IN_FLIGHT, stop - start)
    for j in range(n_live):
        slot_row[j] = start + j
        slot_node[j] = root
    next_row = start + n_live
    # Every row reaches its leaf within ``depth`` + 1 visits, so this many passes would let
    # every row of the block finish alone: a bound should a malformed tree loop.
    passes_left = (stop - start) * (depth + 1)
    while n_live > 0 and passes_left > 0:
        passes_left -= 1
        j = 0
        while j < n_live:
            node = slot_node[j]
            at = np.uintp(node)
            hot = nodes[at]
            child = hot.left
            if child == node:  # at its leaf
                row = np.uintp(slot_row[j])
                for k in range(n_outputs):
                    sums[row, k] += node_values[at, k]
                if next_row < stop:
                    slot_row[j] = next_row
                    slot_node[j] = root
                    next_row += 1
                    j += 1
                else:  # the last slot's row takes this one
                    n_live -= 1
                    slot_row[j] = slot_row[n_live]
                    slot_node[j] = slot_node[n_live]
                continue
            # Routing as ``_goes_right``, written out: inlined here, that helper made this loop
            # ~9× slower (Numba's inlining of it into this loop, not the work, measured).
            value = X[np.uintp(slot_row[j]), np.uintp(hot.feature)]
            split = category_split[at] if category_bitsets.shape[0] > 0 else -1
            if split >= 0:
                if 0.0 <= value < N_CATEGORY_CODES:  # False for NaN too
                    code = np.uintp(value)
                    bit = (category_bitsets[np.uintp(split), code >> 3] >> (code & 7)) & 1
                    goes_right = bit == 0
                else:
                    goes_right = not missing_left[at]
            elif value != value:  # NaN, which the comparison below sends right
                goes_right = not missing_left[at]
            else:
                goes_right = value > hot.threshold
            slot_node[j] = child + goes_right
            j += 1


@kernel
def _leaf_value_sums_kernel(
    X: NDArray[np.float64],
    roots: NDArray[np.intp],
    depths: NDArray[np.intp],
    nodes: NDArray[np.void],
    missing_left: NDArray[np.bool_],
    category_split: NDArray[np.int32],
    category_bitsets: NDArray[np.uint8],
    node_values: NDArray[np.float64],
) -> NDArray[np.float64]:
    n_samples, n_trees, n_outputs = X.shape[0], roots.shape[0], node_values.shape[1]
    # Each row adds its trees' values in tree order, starting from 0.0 (as the twin does).
    sums = np.zeros((n_samples, n_outputs))
    rows_per_block = _rows_per_sum_block(nodes.shape[0], n_trees)
    n_block_rows = min(n_samples, rows_per_block)
    if (
        n_samples < MIN_ROWS_FOR_TREE_BY_TREE
        or n_block_rows * depths.sum() * READ_WHOLE_NODES_PER_VISIT < nodes.shape[0]
    ):
        leaves = _leaf_indices_kernel(
            X, roots, depths, nodes, missing_left, category_split, category_bitsets
        )
        # Tree by tree, in the leaves' memory order; each row still adds in tree order.
        for t in range(n_trees):
            for i in range(n_samples):
                leaf = np.uintp(leaves[i, t])
                for k in range(n_outputs):
                    sums[i, k] += node_values[leaf, k]
        return sums
    slot_node = np.empty(max(PAIRS_IN_STEP, ROWS_IN_FLIGHT), dtype=np.intp)
    slot_row = np.empty(ROWS_IN_FLIGHT, dtype=np.intp)
    seen = 0
    for start in range(0, n_samples, rows_per_block):
        stop = min(n_samples, start + rows_per_block)
        for t in range(n_trees):
            root = roots[t]
            end = roots[t + 1] if t + 1 < n_trees else nodes.shape[0]
            depth = depths[t]
            if (stop - start) * depth * READ_WHOLE_NODES_PER_VISIT >= end - root:
                seen += _read_tree(nodes, node_values, root, end)
            if depth <= FIXED_PASS_MAX_DEPTH:
                _sum_tree_lockstep(
                    X, start, stop, root, depth, nodes, missing_left, category_split,
                    category_bitsets, node_values, sums, slot_node,
                )  # fmt: skip
            else:
                _sum_tree_refilled(
                    X, start, stop, root, depth, nodes, missing_left, category_split,
                    category_bitsets, node_values, sums, slot_node, slot_row,
                )  # fmt: skip
    if seen < 0:  # never (node indices are not negative): uses what ``_read_tree`` read
        sums[0, 0] = np.nan
    return sums


@kernel
def _finite_leaf_value_means_kernel(
    X: NDArray[np.float64],
    roots: NDArray[np.intp],
    depths: NDArray[np.intp],
    nodes: NDArray[np.void],
    missing_left: NDArray[np.bool_],
    category_split: NDArray[np.int32],
    category_bitsets: NDArray[np.uint8],
    node_values: NDArray[np.float64],
) -> NDArray[np.float64]:
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            if np.isinf(X[i, j]):
                return np.empty((0, node_values.shape[1]))
    sums = _leaf_value_sums_kernel(
        X, roots, depths, nodes, missing_left, category_split, category_bitsets, node_values
    )
    return sums / roots.shape[0]


# -- NumPy twins -----------------------------------------------------------------------------


def _leaf_value_sums_numpy(
    X: NDArray[np.float64],
    roots: NDArray[np.intp],
    depths: NDArray[np.intp],
    nodes: NDArray[np.void],
    missing_left: NDArray[np.bool_],
    category_split: NDArray[np.int32],
    category_bitsets: NDArray[np.uint8],
    node_values: NDArray[np.float64],
) -> NDArray[np.float64]:
    # Rows in chunks: the walk holds a few (trees × rows) arrays, which a whole large batch
    # would make gigabytes. A row's sum does not depend on its chunk.
    chunk = max(1, TWIN_PAIRS_PER_CHUNK // max(1, roots.shape[0]))
    if X.shape[0] > chunk:
        arguments = (roots, depths, nodes, missing_left, category_split, category_bitsets)
        return np.concatenate(
            [
                _leaf_value_sums_numpy(X[start : start + chunk], *arguments, node_values)
                for start in range(0, X.shape[0], chunk)
            ]
        )
    leaves = _leaf_indices_numpy(
        X, roots, depths, nodes, missing_left, category_split, category_bitsets
    ).T
    n_outputs = node_values.shape[1]
    # One output at a time by 1-D ``take`` on the flat values: gathering rows of the 2-D array
    # is ~3× slower. Tree by tree, as the kernel adds. Not ``sum(axis=0)``: on a single row
    # NumPy sums pairwise, which can differ in the last bit from the same row in a batch.
    # ``cumsum`` adds in order from the first tree's value; ``+ 0.0`` turns the one thing
    # starting from 0.0 would change, a sum of negative zeros, into 0.0 as well.
    flat = node_values.ravel()
    positions = leaves * n_outputs
    return np.stack(
        [np.cumsum(flat.take(positions + k), axis=0)[-1] + 0.0 for k in range(n_outputs)],
        axis=1,
    ).reshape(X.shape[0], n_outputs)


def _finite_leaf_value_means_numpy(
    X: NDArray[np.float64],
    roots: NDArray[np.intp],
    depths: NDArray[np.intp],
    nodes: NDArray[np.void],
    missing_left: NDArray[np.bool_],
    category_split: NDArray[np.int32],
    category_bitsets: NDArray[np.uint8],
    node_values: NDArray[np.float64],
) -> NDArray[np.float64]:
    if np.isinf(X).any():
        return np.empty((0, node_values.shape[1]))
    sums = _leaf_value_sums_numpy(
        X, roots, depths, nodes, missing_left, category_split, category_bitsets, node_values
    )
    return sums / roots.shape[0]


# -- what the engine calls -------------------------------------------------------------------

_leaf_value_sums = select(_leaf_value_sums_kernel, _leaf_value_sums_numpy)
_finite_leaf_value_means = select(_finite_leaf_value_means_kernel, _finite_leaf_value_means_numpy)


def leaf_value_sums(
    X: NDArray[np.float64], arrays: NodeArrays, node_values: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Sum over the trees of each row's leaf values, shape (n_samples, n_outputs).

    ``node_values`` holds each node's values in one C-contiguous row, shape
    (n_nodes, n_outputs): a leaf's values are then one cache line, not one per output.
    """
    a = arrays
    node_values = np.ascontiguousarray(node_values, dtype=np.float64)
    if node_values.ndim != 2 or node_values.shape[0] != a.nodes.shape[0]:
        raise ValueError(
            f"Expected node values of shape ({a.nodes.shape[0]}, n_outputs); "
            f"got {node_values.shape}."
        )
    return _leaf_value_sums(
        _kernel_rows(X, a), a.roots, a.depths, a.nodes, a.missing_left, a.category_split,
        a.category_bitsets, node_values,
    )  # fmt: skip


def finite_leaf_value_means(
    X: NDArray[np.float64], arrays: NodeArrays, node_values: NDArray[np.float64]
) -> NDArray[np.float64] | None:
    """Mean over the trees of each row's leaf values, or None when ``X`` holds an infinity.

    The same bits as ``leaf_value_sums(X, ...) / n_trees``, in one compiled call and with
    none of its checks: ``X`` must be C-contiguous float64 with at least
    ``arrays.n_columns`` columns and ``node_values`` as ``leaf_value_sums`` makes it. For a
    few rows on a server, between requests the caches have let NumPy and the trees go, and
    each NumPy call a predict makes then costs tens of microseconds (the walk itself ~40).
    """
    a = arrays
    means = _finite_leaf_value_means(
        X, a.roots, a.depths, a.nodes, a.missing_left, a.category_split, a.category_bitsets,
        node_values,
    )  # fmt: skip
    return None if means.shape[0] != X.shape[0] else means
