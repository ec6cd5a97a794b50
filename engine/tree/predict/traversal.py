"""Descending trees: the leaf each row reaches in each tree.

The trees are read in the flat layout of :mod:`engine.tree.predict.node_arrays` (global node indices,
leaves looping onto themselves); summing the leaves' values over many trees, which every
forest's and boosted model's ``predict`` does, is :mod:`engine.tree.predict.leaf_sums`.

Routing, identical in kernel and twin (traversal is exact, so the two agree bit for bit):

- numeric split: ``x <= threshold`` goes left, ``x > threshold`` right, NaN by ``missing_left``;
- categorical split: bit ``c`` of the node's row of ``category_bitsets`` set sends category
  code ``c`` left; NaN (missing or unseen), and any code outside the ``N_CATEGORY_CODES``
  (256) a bitset covers (encoding never produces one, but the kernel must not read past the
  bitset), go by ``missing_left``.

Why the kernels walk the way they do: a forest of fully grown trees is tens of megabytes, far
more than a core's cache, so descending one row through every tree in turn waits on main
memory at every level (~10× slower than the walk below on the 100-tree benchmark forest).
Instead the kernels take a block of rows through one tree at a time, so the tree stays in cache
for the block (Asadi et al. 2014, "Runtime optimizations for tree-based machine learning
models", call this the tree-major order with row blocking), and move (row, tree) pairs down a
few at a time, so the processor overlaps their independent memory loads instead of waiting on
each chain of loads in turn (their "interleaving"). The kernels are serial and release the GIL:
callers spread large batches over threads.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from engine._kernels import inline_kernel, kernel, select
from engine.tree._common import N_CATEGORY_CODES
from engine.tree.predict.node_arrays import NodeArrays, _kernel_rows

__all__ = ["leaf_indices"]

# Kernels: rows taken through every tree before the next rows start, about as many as a tree
# has nodes. A large tree is loaded into cache once per block, so its rows must be many to pay
# for it (on the 100-tree benchmark forest, ~12,000 nodes a tree, 1024-row blocks are ~1.5×
# slower than 8192, and 16384 another ~10% faster); small trees stay in cache anyway, and small
# blocks keep the block's rows in cache too (on 100 depth-6 trees 256-row blocks are ~20%
# faster than 8192). The block's leaves are buffered: at most MAX_PAIRS_PER_BLOCK (16 MB).
MIN_ROWS_PER_BLOCK = 256
MAX_ROWS_PER_BLOCK = 16384
MAX_PAIRS_PER_BLOCK = 1 << 21
# Kernels: (row, tree) pairs moved down together, one level per pass, so that their memory
# loads overlap instead of each waiting on the one before: 16 rows of one tree in a large
# batch, 16 trees of the row for a single row (~3× faster than one pair at a time there).
PAIRS_IN_STEP = 16
# Kernels: a step whose trees are all at most this deep makes exactly as many passes as the
# deepest is deep, without asking after each pair whether it has reached its leaf (leaves loop
# onto themselves, so extra passes leave a pair in place). Deeper trees stop each pair at its
# leaf: the deepest leaf of a fully grown tree is far below the typical one.
FIXED_PASS_MAX_DEPTH = 12
# NumPy twin: levels descended between checks for finished pairs; large batches also drop
# the finished pairs then (compaction), small ones only stop once every pair has finished.
COMPACT_EVERY = 4
# NumPy twin: batches with fewer pairs than this never compact: for a single row the
# bookkeeping would cost more than the wasted work on finished pairs.
COMPACT_MIN_PAIRS = 4096


# -- compiled kernels ------------------------------------------------------------------------


@kernel
def _rows_per_block(n_nodes: int, n_trees: int) -> int:
    """Rows a kernel takes through every tree at a time (see ``MIN_ROWS_PER_BLOCK``)."""
    n_trees = max(1, n_trees)
    rows = min(MAX_ROWS_PER_BLOCK, max(MIN_ROWS_PER_BLOCK, n_nodes // n_trees))
    return max(1, min(rows, MAX_PAIRS_PER_BLOCK // n_trees))


@inline_kernel
def _goes_right(
    value: float,
    at: np.uintp,
    threshold: float,
    missing_left: NDArray[np.bool_],
    category_split: NDArray[np.int32],
    category_bitsets: NDArray[np.uint8],
) -> bool:
    """Whether ``value`` leaves node ``at`` to the right (see the module docstring).

    Inlined by Numba into each walk: a real call per node, passing arrays, cost more than the
    descent itself (~6× measured).
    """
    split = category_split[at] if category_bitsets.shape[0] > 0 else -1
    if split >= 0:
        if 0.0 <= value < N_CATEGORY_CODES:  # False for NaN too
            code = np.uintp(value)
            goes_right = ((category_bitsets[np.uintp(split), code >> 3] >> (code & 7)) & 1) == 0
        else:
            goes_right = not missing_left[at]
    elif value != value:  # NaN, which the comparison below sends right
        goes_right = not missing_left[at]
    else:
        goes_right = value > threshold
    return goes_right


@kernel
def _descend_block(
    X: NDArray[np.float64],
    start: int,
    stop: int,
    roots: NDArray[np.intp],
    depths: NDArray[np.intp],
    nodes: NDArray[np.void],
    missing_left: NDArray[np.bool_],
    category_split: NDArray[np.int32],
    category_bitsets: NDArray[np.uint8],
    leaves: NDArray[np.intp],
    first_column: int,
) -> None:
    """Leaf of rows ``start:stop`` in every tree, into ``leaves[tree, row - first_column]``.

    The block's (row, tree) pairs are taken tree by tree, ``PAIRS_IN_STEP`` at a time. Node
    routing is written out, as ``_goes_right`` does it: inlined, that helper cost 10-15% here.
    Indices Numba cannot tell are non-negative are cast to ``np.uintp``, which spares its
    negative-index wraparound: a third of a node visit's instructions (20 to 30% of the time
    measured).
    """
    has_categorical = category_bitsets.shape[0] > 0
    n_block_rows = stop - start
    n_pairs = roots.shape[0] * n_block_rows
    pair_node = np.empty(PAIRS_IN_STEP, dtype=np.intp)
    pair_row = np.empty(PAIRS_IN_STEP, dtype=np.intp)
    pair_tree = np.empty(PAIRS_IN_STEP, dtype=np.intp)
    for first_pair in range(0, n_pairs, PAIRS_IN_STEP):
        n_step = min(PAIRS_IN_STEP, n_pairs - first_pair)
        deepest = 0
        for j in range(n_step):
            tree = (first_pair + j) // n_block_rows
            pair_tree[j] = tree
            pair_row[j] = start + first_pair + j - tree * n_block_rows
            pair_node[j] = roots[tree]
            deepest = max(deepest, depths[tree])
        fixed_passes = deepest <= FIXED_PASS_MAX_DEPTH
        # No pair needs more passes than its tree is deep (which also bounds the walk should
        # a malformed tree loop).
        for _ in range(deepest):
            moving = False
            for j in range(n_step):
                node = pair_node[j]
                at = np.uintp(node)
                hot = nodes[at]
                child = hot.left
                if not fixed_passes:
                    if child == node:  # at its leaf
                        continue
                    moving = True
                value = X[np.uintp(pair_row[j]), np.uintp(hot.feature)]
                split = category_split[at] if has_categorical else -1
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
                pair_node[j] = child + goes_right
            if not (fixed_passes or moving):
                break
        for j in range(n_step):
            leaves[pair_tree[j], pair_row[j] - first_column] = pair_node[j]


@kernel
def _leaf_indices_kernel(
    X: NDArray[np.float64],
    roots: NDArray[np.intp],
    depths: NDArray[np.intp],
    nodes: NDArray[np.void],
    missing_left: NDArray[np.bool_],
    category_split: NDArray[np.int32],
    category_bitsets: NDArray[np.uint8],
) -> NDArray[np.intp]:
    n_samples = X.shape[0]
    leaves = np.empty((roots.shape[0], n_samples), dtype=np.intp)
    rows_per_block = _rows_per_block(nodes.shape[0], roots.shape[0])
    for start in range(0, n_samples, rows_per_block):
        stop = min(n_samples, start + rows_per_block)
        _descend_block(
            X, start, stop, roots, depths, nodes, missing_left, category_split,
            category_bitsets, leaves, 0,
        )  # fmt: skip
    # (n_samples, n_trees), tree-major in memory as the twin returns it.
    return leaves.T


# -- NumPy twins -----------------------------------------------------------------------------


def _leaf_indices_numpy(
    X: NDArray[np.float64],
    roots: NDArray[np.intp],
    depths: NDArray[np.intp],
    nodes: NDArray[np.void],
    missing_left: NDArray[np.bool_],
    category_split: NDArray[np.int32],
    category_bitsets: NDArray[np.uint8],
) -> NDArray[np.intp]:
    """Every (row, tree) pair descends together: one level of all trees is a few array ops.

    The cost of NumPy traversal is the number of array operations, not their size, so
    descending tree by tree would pay Python overhead ``n_trees × depth`` times.
    """
    n_samples, n_features = X.shape
    n_trees = roots.shape[0]
    n_pairs = n_samples * n_trees
    flat = X.ravel()
    left, feature, threshold = nodes["left"], nodes["feature"], nodes["threshold"]
    # Pairs are tree-major: pair k is row k % n_samples of tree k // n_samples.
    row_base = np.tile(np.arange(n_samples, dtype=np.intp) * n_features, n_trees)
    current = np.repeat(roots, n_samples)
    pair = np.arange(n_pairs)
    leaf = np.empty(n_pairs, dtype=np.intp)
    has_missing = bool(np.isnan(flat).any())
    has_categorical = bool(category_bitsets.shape[0])
    compact = n_pairs >= COMPACT_MIN_PAIRS
    # Every pair has reached its leaf after the deepest tree's depth in levels.
    for level in range(1, int(depths.max(initial=0)) + 1):
        # ``take``/``put`` and intp positions rather than ``[]`` and boolean masks skip NumPy's
        # general indexing machinery (~30% of the time), except on the node records' fields:
        # ``take`` copies a strided array whole first, ``[]`` gathers from it in place.
        position = row_base + feature[current]
        values = flat.take(position)
        # "x <= threshold goes left"; NaN compares False and is routed just below.
        goes_right = values > threshold[current]
        if has_missing:
            missing = np.isnan(values)
            goes_right[missing] = ~missing_left[current[missing]]
        if has_categorical:
            _route_categorical(
                current, values, goes_right, missing_left, category_split, category_bitsets
            )
        current = left[current].astype(np.intp)
        current += goes_right
        if level % COMPACT_EVERY:
            continue
        done = left[current] == current
        if compact:
            finished = np.flatnonzero(done)
            leaf.put(pair.take(finished), current.take(finished))
            kept = np.flatnonzero(~done)
            pair, current, row_base = pair.take(kept), current.take(kept), row_base.take(kept)
        elif done.all():
            break
    leaf[pair] = current
    return leaf.reshape(n_trees, n_samples).T


def _route_categorical(
    current: NDArray[np.intp],
    values: NDArray[np.float64],
    goes_right: NDArray[np.bool_],
    missing_left: NDArray[np.bool_],
    category_split: NDArray[np.int32],
    category_bitsets: NDArray[np.uint8],
) -> None:
    """Overwrite ``goes_right`` for the pairs sitting at a categorical split."""
    split = category_split.take(current)
    is_categorical = split >= 0
    if not is_categorical.any():
        return
    codes = values[is_categorical]
    with np.errstate(invalid="ignore"):  # NaN compares False: it goes the missing way
        known = (codes >= 0) & (codes < N_CATEGORY_CODES)
    code = np.where(known, codes, 0).astype(np.intp)
    bits = category_bitsets[split[is_categorical], code >> 3]
    goes_left = ((bits >> (code & 7)) & 1).astype(bool)
    goes_right[is_categorical] = ~np.where(known, goes_left, missing_left[current[is_categorical]])


# -- what the engine calls -------------------------------------------------------------------

_leaf_indices = select(_leaf_indices_kernel, _leaf_indices_numpy)


def leaf_indices(X: NDArray[np.float64], arrays: NodeArrays) -> NDArray[np.intp]:
    """Global index of the leaf each row reaches in each tree, shape (n_samples, n_trees)."""
    a = arrays
    return _leaf_indices(
        _kernel_rows(X, a), a.roots, a.depths, a.nodes, a.missing_left, a.category_split,
        a.category_bitsets,
    )  # fmt: skip
