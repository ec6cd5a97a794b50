"""The flat node layout tree traversal reads, for one tree or many packed together.

Trees are read in one flat layout (:class:`NodeArrays`) shared by a single ``Tree`` and by many
trees packed together: node indices are global, each tree starts at its root, and leaves loop
onto themselves (left child = the leaf itself, threshold +inf, missing going left, no category
split). The self-loop lets the NumPy twin move every (row, tree) pair one level at a time with
no record of which pairs have finished; the compiled kernels stop a row at the first node whose
left child is itself. The walks over it are :mod:`engine.tree.predict.traversal` (the leaf each row
reaches in each tree) and :mod:`engine.tree.predict.leaf_sums` (leaf values summed over trees).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from engine.tree._common import BITSET_BYTES, BITSET_DTYPE

__all__ = ["HOT_NODE_DTYPE", "NodeArrays", "node_arrays"]

# What a kernel reads at every node it passes, in one 16-byte record: one cache line fetch per
# node rather than one per array (a row's path through a deep tree is mostly cache misses).
HOT_NODE_DTYPE = np.dtype([("threshold", "<f8"), ("left", "<i4"), ("feature", "<i4")])


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
