"""A fitted tree as flat arrays.

One structured array holds every node; prediction, ``apply``, importances, TreeSHAP and
persistence all read it. Children are allocated in pairs, so ``right_child == left_child + 1``
for every internal node and descending is ``child = left_child + goes_right``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from engine.tree.predict.node_arrays import node_arrays
from engine.tree.predict.traversal import leaf_indices

__all__ = ["NODE_DTYPE", "Tree"]

NODE_DTYPE = np.dtype(
    [
        ("left_child", "<i4"),  # -1 for leaves
        ("right_child", "<i4"),
        ("feature", "<i4"),  # -1 for leaves
        ("threshold", "<f8"),  # numeric splits: x <= threshold goes left
        ("missing_left", "u1"),  # where missing (and unseen categories) go
        ("category_split", "<i4"),  # row of Tree.category_bitsets, -1 for numeric splits
        ("impurity", "<f8"),
        # Distinct training rows in the node: int32, as scikit-learn's node counts, since a
        # tree's node indices are int32 anyway and every byte here is paid per node.
        ("n_samples", "<i4"),
        ("weighted_n_samples", "<f8"),  # their total weight (bootstrap counts included)
        ("depth", "<i4"),
    ]
)


class Tree:
    """Flat representation of one fitted decision tree.

    Attributes
    ----------
    nodes : ndarray of NODE_DTYPE, shape (n_nodes,)
    values : ndarray of float64, shape (n_nodes, n_outputs)
        Class proportions (classification) or mean target (regression) of each node.
    category_bitsets : ndarray of uint8, shape (n_categorical_splits, 32)
        Bit ``c`` (little-endian within bytes) set when category code ``c`` goes left.
    n_features : int
    """

    def __init__(
        self,
        nodes: NDArray[np.void],
        values: NDArray[np.float64],
        category_bitsets: NDArray[np.uint8],
        n_features: int,
    ) -> None:
        self.nodes = nodes
        self.values = values
        self.category_bitsets = category_bitsets
        self.n_features = n_features

    @property
    def node_count(self) -> int:
        return int(self.nodes.shape[0])

    @property
    def n_leaves(self) -> int:
        return int((self.nodes["left_child"] < 0).sum())

    @property
    def max_depth(self) -> int:
        return int(self.nodes["depth"].max())

    def apply(self, X: NDArray[np.float64]) -> NDArray[np.intp]:
        """Leaf index of each row.

        Parameters
        ----------
        X : ndarray of float64, shape (n_samples, n_features)
            Raw numeric values with categorical columns already encoded as category codes
            (NaN for missing or unseen categories).
        """
        # Laid out per call rather than kept: a tree is persisted as its node array alone,
        # and laying out is a few array operations, cheap next to descending.
        arrays = node_arrays([self.nodes], [self.category_bitsets])
        return leaf_indices(X, arrays)[:, 0]

    def predict(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        """Node values at the leaves, shape (n_samples, n_outputs)."""
        return self.values[self.apply(X)]

    def impurity_decrease(self) -> NDArray[np.float64]:
        """Weighted impurity decrease of every node (0 for leaves), shape (n_nodes,)."""
        nodes = self.nodes
        internal = nodes["left_child"] >= 0
        decrease = np.zeros(self.node_count)
        left = nodes["left_child"][internal]
        right = nodes["right_child"][internal]
        weighted = nodes["weighted_n_samples"] * nodes["impurity"]
        decrease[internal] = weighted[internal] - weighted[left] - weighted[right]
        return decrease

    def feature_importances(self) -> NDArray[np.float64]:
        """Mean decrease in impurity per feature, normalised to sum to one."""
        nodes = self.nodes
        internal = nodes["left_child"] >= 0
        importances = np.bincount(
            nodes["feature"][internal],
            weights=self.impurity_decrease()[internal],
            minlength=self.n_features,
        ).astype(np.float64)
        importances = np.maximum(importances, 0.0)
        total = importances.sum()
        return importances / total if total > 0 else importances
