"""Many trees packed into one node array, traversed together.

Prediction cost in NumPy is dominated by the number of array operations, not their size, so
descending tree by tree pays Python overhead ``n_trees × depth`` times. Here every (row, tree)
pair descends at once: one level of all trees is a handful of array operations. Leaves loop
onto themselves (threshold +inf, left child = itself), so a pair that has reached its leaf
simply stays there and no bookkeeping is needed between levels; finished pairs are dropped
only every few levels, when enough of them have accumulated to pay for the compaction.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from engine.tree._tree import Tree

__all__ = ["PackedTrees"]

# Levels between compactions of the active (row, tree) pairs in large batches (small
# batches only check whether every pair has reached its leaf).
COMPACT_EVERY = 4
# Batches with fewer pairs than this never compact: for a single row the bookkeeping would
# cost more than the wasted work on finished pairs.
COMPACT_MIN_PAIRS = 4096


class PackedTrees:
    """Read-only traversal structure for a list of trees (built once per fitted model).

    Attributes
    ----------
    offsets : ndarray of intp, shape (n_trees,)
        Index of each tree's root in the packed arrays.
    values : ndarray of float64, shape (n_nodes_total, n_outputs)
    """

    def __init__(self, trees: Sequence[Tree]) -> None:
        sizes = np.array([tree.node_count for tree in trees], dtype=np.intp)
        self.offsets = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.intp)
        nodes = np.concatenate([tree.nodes for tree in trees])
        base = np.repeat(self.offsets, sizes)
        is_leaf = nodes["left_child"] < 0
        self.is_leaf = is_leaf
        # Indices stay intp: NumPy converts any other index type on every gather.
        self.left = np.where(is_leaf, np.arange(nodes.size), nodes["left_child"] + base).astype(
            np.intp
        )
        self.feature = np.where(is_leaf, 0, nodes["feature"]).astype(np.intp)
        self.threshold = np.where(is_leaf, np.inf, nodes["threshold"])
        self.missing_left = np.where(is_leaf, True, nodes["missing_left"].astype(bool))
        bitset_sizes = [tree.category_bitsets.shape[0] for tree in trees]
        bitset_base = np.repeat(
            np.concatenate(([0], np.cumsum(bitset_sizes)[:-1])).astype(np.int64), sizes
        )
        split = nodes["category_split"].astype(np.int64)
        self.category_split = np.where(split >= 0, split + bitset_base, -1)
        self.category_bitsets = (
            np.concatenate([tree.category_bitsets for tree in trees])
            if sum(bitset_sizes)
            else np.zeros((0, 32), dtype=np.uint8)
        )
        self.values = np.concatenate([tree.values for tree in trees])
        # One contiguous array per output: a 1-D ``take`` is ~3× faster than gathering rows
        # of the 2-D ``values``.
        self._value_columns = [np.ascontiguousarray(column) for column in self.values.T]
        self.max_depth = max(tree.max_depth for tree in trees)
        self.n_trees = len(trees)

    def apply(self, X: NDArray[np.float64]) -> NDArray[np.intp]:
        """Packed leaf index of each (row, tree), shape (n_samples, n_trees).

        ``X`` holds raw values with categorical columns encoded (see ``Tree.apply``).
        """
        n_samples, n_features = X.shape
        n_pairs = n_samples * self.n_trees
        flat = X.ravel()
        # Pairs are tree-major: pair k is row k % n_samples of tree k // n_samples.
        row_base = np.tile(np.arange(n_samples, dtype=np.intp) * n_features, self.n_trees)
        current = np.repeat(self.offsets, n_samples)
        pair = np.arange(n_pairs)
        leaf = np.empty(n_pairs, dtype=np.intp)
        has_missing = bool(np.isnan(flat).any())
        has_categorical = bool(self.category_bitsets.shape[0])
        compact = n_pairs >= COMPACT_MIN_PAIRS
        # ``take``/``put`` and integer positions rather than ``[]`` and boolean masks: for
        # these 1-D gathers they skip NumPy's general indexing machinery (~30% of the time).
        feature, threshold, left = self.feature, self.threshold, self.left
        for level in range(1, self.max_depth + 1):
            position = feature.take(current)
            position += row_base
            values = flat.take(position)
            # "x <= threshold goes left"; NaN compares False and is routed just below.
            goes_right = values > threshold.take(current)
            if has_missing:
                missing = np.isnan(values)
                goes_right[missing] = ~self.missing_left[current[missing]]
            if has_categorical:
                self._route_categorical(current, values, goes_right)
            current = left.take(current)
            current += goes_right
            if level % COMPACT_EVERY:
                continue
            done = self.is_leaf.take(current)
            if compact:
                finished = np.flatnonzero(done)
                leaf.put(pair.take(finished), current.take(finished))
                kept = np.flatnonzero(~done)
                pair, current, row_base = pair.take(kept), current.take(kept), row_base.take(kept)
            elif done.all():
                break
        leaf[pair] = current
        return leaf.reshape(self.n_trees, n_samples).T

    def leaf_values(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        """Leaf values of every tree, shape (n_trees, n_samples, n_outputs)."""
        leaves = self.apply(X).T
        return np.stack([column.take(leaves) for column in self._value_columns], axis=-1)

    def leaf_value_sum(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        """Sum over the trees of their leaf values, shape (n_samples, n_outputs).

        Equal to ``leaf_values(X).sum(axis=0)`` bit for bit (the same additions in the same
        order) without the (n_trees, n_samples, n_outputs) block.
        """
        leaves = self.apply(X).T
        return np.stack([column.take(leaves).sum(axis=0) for column in self._value_columns], axis=1)

    def _route_categorical(
        self,
        current: NDArray[np.intp],
        values: NDArray[np.float64],
        goes_right: NDArray[np.bool_],
    ) -> None:
        split = self.category_split[current]
        is_categorical = split >= 0
        if not is_categorical.any():
            return
        codes = values[is_categorical]
        known = ~np.isnan(codes)
        code = np.where(known, codes, 0).astype(np.intp)
        bits = self.category_bitsets[split[is_categorical], code >> 3]
        goes_left = ((bits >> (code & 7)) & 1).astype(bool)
        missing_left = self.missing_left[current[is_categorical]]
        goes_right[is_categorical] = ~np.where(known, goes_left, missing_left)

    def local_leaves(self, X: NDArray[np.float64]) -> NDArray[np.intp]:
        """Leaf index within each tree (as ``Tree.apply``), shape (n_samples, n_trees)."""
        return self.apply(X) - self.offsets[None, :]
