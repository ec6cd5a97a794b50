"""Many trees packed into one node array, traversed together.

The packing is built once per fitted model; descending is ``engine.tree.predict.traversal``'s and
summing leaf values ``engine.tree.predict.leaf_sums``'s (a compiled kernel, or its NumPy twin
under ``COPPICE_ENGINE_KERNELS=numpy``).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numpy.typing import NDArray

from engine.tree._tree import Tree
from engine.tree.predict.leaf_sums import finite_leaf_value_means, leaf_value_sums
from engine.tree.predict.node_arrays import node_arrays
from engine.tree.predict.traversal import leaf_indices

__all__ = ["MIN_ROWS_PER_THREAD", "PackedTrees"]

# Rows below which a thread of its own costs more than it saves (a pool starts in ~0.1 ms).
MIN_ROWS_PER_THREAD = 2048


class PackedTrees:
    """Read-only traversal structure for a list of trees (built once per fitted model).

    Attributes
    ----------
    offsets : ndarray of intp, shape (n_trees,)
        Index of each tree's root in the packed arrays.
    values : ndarray of float64, shape (n_nodes_total, n_outputs)
    """

    def __init__(self, trees: Sequence[Tree]) -> None:
        self._nodes = node_arrays(
            [tree.nodes for tree in trees], [tree.category_bitsets for tree in trees]
        )
        self.offsets = self._nodes.roots
        # A node's values side by side (C order), so a leaf's values are one cache line for the
        # kernels. Filled tree by tree: a concatenated copy would be one more model-sized
        # transient.
        n_outputs = trees[0].values.shape[1]
        self.values = np.empty((self._nodes.nodes.size, n_outputs), dtype=np.float64)
        for tree, root in zip(trees, self.offsets, strict=True):
            self.values[root : root + tree.values.shape[0]] = tree.values
        self.max_depth = max(tree.max_depth for tree in trees)
        self.n_trees = len(trees)

    def apply(self, X: NDArray[np.float64]) -> NDArray[np.intp]:
        """Packed leaf index of each (row, tree), shape (n_samples, n_trees).

        ``X`` holds raw values with categorical columns encoded (see ``Tree.apply``).
        """
        return leaf_indices(X, self._nodes)

    def leaf_values(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        """Leaf values of every tree, shape (n_trees, n_samples, n_outputs)."""
        return self.values[self.apply(X).T]

    def leaf_value_sum(self, X: NDArray[np.float64], n_threads: int = 1) -> NDArray[np.float64]:
        """Sum over the trees of their leaf values, shape (n_samples, n_outputs).

        Each row's values are added tree by tree from 0.0, whatever the batch size, without
        the (n_trees, n_samples, n_outputs) block ``leaf_values`` builds. So the rows of a
        large batch can be shared among ``n_threads`` threads (the traversal kernels release
        the GIL) with the same result to the last bit.
        """
        n_threads = min(n_threads, X.shape[0] // MIN_ROWS_PER_THREAD)
        if n_threads <= 1:
            return leaf_value_sums(X, self._nodes, self.values)
        bounds = np.linspace(0, X.shape[0], n_threads + 1).astype(np.intp)
        with ThreadPoolExecutor(n_threads, thread_name_prefix="coppice-predict") as pool:
            parts = pool.map(
                lambda start, stop: leaf_value_sums(X[start:stop], self._nodes, self.values),
                bounds[:-1],
                bounds[1:],
            )
            return np.concatenate(list(parts))

    def finite_leaf_value_mean(self, X: NDArray[np.float64]) -> NDArray[np.float64] | None:
        """``leaf_value_sum(X) / n_trees`` to the bit, in one compiled call that checks
        nothing but infinities: None when ``X`` holds one. ``X`` must be C-contiguous float64
        with at least the columns the trees split on (the caller has checked)."""
        return finite_leaf_value_means(X, self._nodes, self.values)

    def local_leaves(self, X: NDArray[np.float64]) -> NDArray[np.intp]:
        """Leaf index within each tree (as ``Tree.apply``), shape (n_samples, n_trees)."""
        return self.apply(X) - self.offsets[None, :]
