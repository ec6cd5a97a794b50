"""Descending trees: the leaf each row reaches in each tree, and leaf values summed over trees.

Trees are read in one flat layout (:class:`NodeArrays`) shared by a single ``Tree`` and by many
trees packed together: node indices are global, each tree starts at its root, and leaves loop
onto themselves (left child = the leaf itself, threshold +inf, missing going left, no category
split). The self-loop lets the NumPy twin move every (row, tree) pair one level at a time with
no record of which pairs have finished; the compiled kernels stop a row at the first node whose
left child is itself.

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

Summing leaf values over a batch (``leaf_value_sums``, every forest's and boosted model's
``predict``) goes further, tree by tree over a block of rows:

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

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from engine._kernels import inline_kernel, kernel, select
from engine.tree._common import BITSET_BYTES, BITSET_DTYPE, N_CATEGORY_CODES

__all__ = ["NodeArrays", "leaf_indices", "leaf_value_sums", "node_arrays"]

# What a kernel reads at every node it passes, in one 16-byte record: one cache line fetch per
# node rather than one per array (a row's path through a deep tree is mostly cache misses).
HOT_NODE_DTYPE = np.dtype([("threshold", "<f8"), ("left", "<i4"), ("feature", "<i4")])
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
# NumPy twin: levels descended between checks for finished pairs; large batches also drop
# the finished pairs then (compaction), small ones only stop once every pair has finished.
COMPACT_EVERY = 4
# NumPy twin of the leaf-value sums: (row, tree) pairs walked at a time.
TWIN_PAIRS_PER_CHUNK = 500_000
# NumPy twin: batches with fewer pairs than this never compact: for a single row the
# bookkeeping would cost more than the wasted work on finished pairs.
COMPACT_MIN_PAIRS = 4096


class NodeArrays(NamedTuple):
    """The nodes of one or more trees as traversal reads them (see the module docstring).

    ``roots`` and ``depths`` hold each tree's root node and depth (from the nodes' ``depth``
    field, as ``Tree.max_depth``: walks make that many levels at most); ``nodes`` (threshold,
    left child, feature: ``HOT_NODE_DTYPE``), ``missing_left`` and ``category_split`` one entry
    per node; ``category_bitsets`` one 32-byte row per categorical split.
    """

    roots: NDArray[np.intp]
    depths: NDArray[np.intp]
    nodes: NDArray[np.void]
    missing_left: NDArray[np.bool_]
    category_split: NDArray[np.int32]
    category_bitsets: NDArray[np.uint8]
    # Columns a matrix needs for these trees (one more than the highest feature split on);
    # checked before a kernel runs, since kernels do not check bounds.
    n_columns: int


def node_arrays(
    nodes: Sequence[NDArray[np.void]], category_bitsets: Sequence[NDArray[np.uint8]]
) -> NodeArrays:
    """Trees given by their ``NODE_DTYPE`` nodes and category bitsets, in one layout.

    Filled tree by tree into arrays of the final size: concatenating the trees' full node
    records first would hold a second copy of the whole model at once (~600 MB for 100 fully
    grown trees on a million rows, most of a large forest's peak memory).
    """
    sizes = np.array([tree_nodes.shape[0] for tree_nodes in nodes], dtype=np.intp)
    roots = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.intp)
    total = int(sizes.sum())
    if total > np.iinfo(np.int32).max:
        raise ValueError(f"{total} nodes: traversal indexes at most 2**31 - 1.")
    hot = np.empty(total, dtype=HOT_NODE_DTYPE)
    missing_left = np.empty(total, dtype=np.bool_)
    category_split = np.empty(total, dtype=np.int32)
    depths = np.zeros(len(nodes), dtype=np.intp)
    n_bitsets = 0
    n_columns = 0
    for tree, (tree_nodes, root) in enumerate(zip(nodes, roots, strict=True)):
        part = slice(root, root + tree_nodes.shape[0])
        is_leaf = tree_nodes["left_child"] < 0
        hot["left"][part] = np.where(
            is_leaf, np.arange(part.start, part.stop), tree_nodes["left_child"] + root
        )
        hot["feature"][part] = np.where(is_leaf, 0, tree_nodes["feature"])
        hot["threshold"][part] = np.where(is_leaf, np.inf, tree_nodes["threshold"])
        missing_left[part] = is_leaf | tree_nodes["missing_left"].astype(bool)
        split = tree_nodes["category_split"]
        category_split[part] = np.where(is_leaf | (split < 0), -1, split + n_bitsets)
        n_bitsets += category_bitsets[tree].shape[0]
        if tree_nodes.size:
            depths[tree] = tree_nodes["depth"].max()
        if not is_leaf.all():
            n_columns = max(n_columns, int(tree_nodes["feature"][~is_leaf].max()) + 1)
    return NodeArrays(
        roots=roots,
        depths=depths,
        nodes=hot,
        missing_left=missing_left,
        category_split=category_split,
        category_bitsets=(
            np.concatenate(category_bitsets).astype(BITSET_DTYPE, copy=False)
            if n_bitsets
            else np.zeros((0, BITSET_BYTES), dtype=BITSET_DTYPE)
        ),
        n_columns=n_columns,
    )


# -- compiled kernels ------------------------------------------------------------------------


@kernel
def _rows_per_block(n_nodes: int, n_trees: int) -> int:
    """Rows a kernel takes through every tree at a time (see ``MIN_ROWS_PER_BLOCK``)."""
    n_trees = max(1, n_trees)
    rows = min(MAX_ROWS_PER_BLOCK, max(MIN_ROWS_PER_BLOCK, n_nodes // n_trees))
    return max(1, min(rows, MAX_PAIRS_PER_BLOCK // n_trees))


@kernel
def _rows_per_sum_block(n_nodes: int, n_trees: int) -> int:
    """Rows a leaf-value sum takes through every tree at a time (see ``MIN_ROWS_PER_SUM_BLOCK``)."""
    return min(MAX_ROWS_PER_SUM_BLOCK, max(MIN_ROWS_PER_SUM_BLOCK, 2 * n_nodes // max(1, n_trees)))


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


# -- what the engine calls -------------------------------------------------------------------

_leaf_indices = select(_leaf_indices_kernel, _leaf_indices_numpy)
_leaf_value_sums = select(_leaf_value_sums_kernel, _leaf_value_sums_numpy)


def _kernel_rows(X: NDArray[np.float64], arrays: NodeArrays) -> NDArray[np.float64]:
    """``X`` as the kernels read it: C-contiguous float64 with every column the trees use.

    A kernel does not check bounds, so a matrix too narrow for the trees is refused here
    rather than read past.
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] < arrays.n_columns:
        raise ValueError(
            f"Expected a 2-D matrix with at least {arrays.n_columns} columns; got shape {X.shape}."
        )
    return X


def leaf_indices(X: NDArray[np.float64], arrays: NodeArrays) -> NDArray[np.intp]:
    """Global index of the leaf each row reaches in each tree, shape (n_samples, n_trees)."""
    a = arrays
    return _leaf_indices(
        _kernel_rows(X, a), a.roots, a.depths, a.nodes, a.missing_left, a.category_split,
        a.category_bitsets,
    )  # fmt: skip


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
