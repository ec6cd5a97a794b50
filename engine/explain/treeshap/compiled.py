"""One tree's TreeSHAP through the Numba kernels: the tree's node fields in, SHAP values out."""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from engine.explain.treeshap.kernels import add_tree_shap
from engine.explain.treeshap.layout import feature_columns, leaf_paths
from engine.tree._tree import Tree

__all__ = ["expected_value", "explain_tree"]

# Rows routed at a time: the (nodes × rows) routing matrix stays within about 1 MiB, and
# the rows' slice of the SHAP values stays cache-resident while every leaf adds to it.
ROUTING_BYTES = 1 << 20
MIN_CHUNK_ROWS, MAX_CHUNK_ROWS = 64, 2048


class _LeafPaths(NamedTuple):
    """:func:`layout.leaf_paths`'s flattened root-to-leaf paths (see there)."""

    leaf_node: NDArray[np.intp]
    split_start: NDArray[np.intp]
    split_node: NDArray[np.intp]
    split_left: NDArray[np.uint8]
    split_slot: NDArray[np.intp]
    slot_start: NDArray[np.intp]
    slot_feature: NDArray[np.intp]
    slot_zero: NDArray[np.float64]

    @classmethod
    def of(cls, tree: Tree) -> _LeafPaths:
        nodes = tree.nodes  # the kernels read the node fields in place, strided
        return cls(*leaf_paths(nodes["left_child"], nodes["feature"], nodes["weighted_n_samples"]))

    def expected_value(self, tree: Tree) -> NDArray[np.float64]:
        """Σ over leaves of (product of the path's zero fractions) · leaf value."""
        reach = np.multiply.reduceat(self.slot_zero, self.slot_start[:-1])
        return reach @ tree.values[self.leaf_node].astype(np.float64)


@functools.lru_cache(maxsize=4)
def _quadrature(max_nodes: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Gauss–Legendre rules on [0, 1]: row ``n`` holds the ``n`` nodes and weights."""
    nodes = np.zeros((max_nodes + 1, max(max_nodes, 1)))
    weights = np.zeros_like(nodes)
    for n in range(1, max_nodes + 1):
        x, w = np.polynomial.legendre.leggauss(n)
        nodes[n, :n] = (x + 1.0) / 2.0
        weights[n, :n] = w / 2.0
    return nodes, weights


def expected_value(tree: Tree) -> NDArray[np.float64]:
    """The tree's output with no feature known, shape (n_outputs,): the cover-weighted leaf mean."""
    if tree.nodes["left_child"][0] < 0:
        return tree.values[0].astype(np.float64)
    return _LeafPaths.of(tree).expected_value(tree)


def explain_tree(
    tree: Tree, X: NDArray[np.float64], share_patterns: bool = True
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """SHAP values (n_samples, n_features, n_outputs) and expected value (n_outputs,).

    ``share_patterns=False`` makes the kernel evaluate every row on its own (for the tests).
    """
    n_samples, n_outputs = X.shape[0], tree.values.shape[1]
    phi = np.zeros((n_samples, tree.n_features, n_outputs))
    nodes = tree.nodes
    if nodes["left_child"][0] < 0:
        return phi, tree.values[0].astype(np.float64)
    paths = _LeafPaths.of(tree)
    used_features, node_column, slot_column = feature_columns(
        nodes["left_child"], nodes["feature"], paths.slot_feature, tree.n_features
    )
    max_nodes = (int(np.diff(paths.slot_start).max()) + 1) // 2
    quadrature_nodes, quadrature_weights = _quadrature(-(-max_nodes // 8) * 8)
    chunk_rows = min(MAX_CHUNK_ROWS, max(MIN_CHUNK_ROWS, ROUTING_BYTES // tree.node_count))
    add_tree_shap(
        nodes["left_child"],
        node_column,
        nodes["threshold"],
        nodes["missing_left"],
        nodes["category_split"],
        np.ascontiguousarray(tree.category_bitsets, dtype=np.uint8),
        paths.leaf_node,
        paths.split_start,
        paths.split_node,
        paths.split_left,
        paths.split_slot,
        paths.slot_start,
        slot_column,
        paths.slot_zero,
        used_features,
        np.ascontiguousarray(tree.values, dtype=np.float64),
        quadrature_nodes,
        quadrature_weights,
        np.ascontiguousarray(X, dtype=np.float64),
        chunk_rows,
        share_patterns,
        phi,
    )
    return phi, paths.expected_value(tree)
